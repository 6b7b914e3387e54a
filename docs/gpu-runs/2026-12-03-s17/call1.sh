#!/usr/bin/env bash
# Session 17, call 1: 1. GPU correctness of every transform's points, the spread picks among
# them (a row over CTAs of a persistent grid meeting through global memory). 2. Does the copy
# rate scale with the SMs taking part (sm_probe.py)? 3. The spread points beside the cluster
# bests, torch and the copy at 256x262144, 16x262144 and 1024x131072 (spread.json).
# 4. What a cluster of 16 costs by itself (session 16's next/cluster_cost.py).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=docs/gpu-runs/2026-12-03-s17; n=docs/gpu-runs/2026-12-03-s16/next; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 150 python3 bench/family_quality.py --kernel softmax --points $d/spread.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -14 | tee -a $log
timeout -s KILL 60 python3 $d/sm_probe.py 2>&1 | tail -12 | tee -a $log
timeout -s KILL 40 python3 $n/cluster_cost.py 2>&1 | tail -4 | tee -a $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
tail -5 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
