#!/bin/bash
# at eb472c6, the same warm H100: the GEMM library of bb728f3's call1 database (4096^3 and
# 8192^3) timed by the child and, through the bundle's loader, by the peers' harness.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TUNEFORGE_COMMIT=eb472c6 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
gunzip -c runs/2026-12-06-bb728f3-peers/call1/gemm/r/tune.db.gz > /tmp/gm.db
rm -rf /tmp/gmlib
python3 -m cli.main library export --kernel gemm_bias_relu --db /tmp/gm.db --out /tmp/gmlib 2>&1 | tail -1
timeout -s KILL 400 python3 bench/peer_quality.py --family gemm_bias_relu --campaigns /tmp/gm.db \
  --no-replay --shapes 4096x4096x4096 --bundle /tmp/gmlib --budget-s 360 --out $OUT/q \
  2>$OUT/progress.txt > $OUT/log.txt
echo "rc $?"; tail -16 $OUT/log.txt
