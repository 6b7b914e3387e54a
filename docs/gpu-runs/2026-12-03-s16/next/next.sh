#!/usr/bin/env bash
# For the next session (<= 200 s of timeouts; not run yet): is it the cluster of 16 that holds
# 256x262144 at 85 % of the copy rate? 1. What an empty cluster-16 launch costs against 8 and
# none (cluster_cost.py). 2. The same 512-thread CTA at 1024x131072 (94 % over clusters of 8)
# over clusters of 16 at half the floats a thread, and at 256x262144 the best beside a cluster
# of 16 of 1024 threads at 16 floats (one CTA an SM) (next.json).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
d=docs/gpu-runs/2026-12-03-s16/next; mkdir -p /tmp/r
timeout -s KILL 60 python3 $d/cluster_cost.py 2>&1 | tail -4 | tee $OUT/log.txt
timeout -s KILL 130 python3 bench/family_quality.py --kernel softmax --points $d/next.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -8 | tee -a $OUT/log.txt
tar czf $OUT/r.tgz -C /tmp r
