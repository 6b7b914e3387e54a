#!/usr/bin/env bash
# Session 16, call 6 (<= 90 s of timeouts): is the partial last wave what holds 256x262144 at 86 %?
# The campaign best (14 clusters of 16 resident) at 224 rows (16 whole waves), 238 (17), 252 (18)
# and 256 (18.3) rows of 262144, beside torch and the copy.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
mkdir -p /tmp/r
timeout -s KILL 90 python3 bench/family_quality.py --kernel softmax --points docs/gpu-runs/2026-12-03-s16/waves.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -7 | tee $OUT/log.txt
tar czf $OUT/r.tgz -C /tmp r
