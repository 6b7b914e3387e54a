#!/bin/bash
# at eb472c6: the softmax library of the 553da7c database (its eleven shapes' entries) timed
# twice in one run: by the evaluation child (the table of record) and, through the exported
# bundle's own loader, by the peers' harness beside torch.compile, Triton and the copy.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TUNEFORGE_COMMIT=eb472c6 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
rm -rf /tmp/smlib
python3 -m cli.main library export --kernel softmax --db /tmp/sm.db --out /tmp/smlib 2>&1 | tail -1
timeout -s KILL 480 python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --bundle /tmp/smlib --budget-s 420 --out $OUT/q 2>$OUT/progress.txt \
  > $OUT/log.txt
echo "rc $?"; tail -32 $OUT/log.txt
