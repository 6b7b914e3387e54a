#!/bin/bash
# at 98284f1: the transpose user family's points around Triton's arrangement (64x64 tiles,
# 128 threads, 32 elements a thread), beside the peers, flushed and sustained
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=98284f1
d=runs/2026-12-06-98284f1-transpose-points
timeout 400 python3 bench/peer_quality.py --spec examples/transpose --family transpose \
  --shapes 8192x8192 --points $d/points.json --no-replay --budget-s 300 --out $OUT/q > $OUT/log.txt 2>&1
echo "rc $?"; tail -30 $OUT/log.txt
