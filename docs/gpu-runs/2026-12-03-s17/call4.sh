#!/usr/bin/env bash
# Session 17, call 4: 1. The user family's GPU tests with the tiled transpose judged against the
# naive one. 2. The sweep: the fastest point of each of the replay dataset's 11 shapes (16x262144's
# spread group among them) beside torch and the copy in one run (sweep.json), and a cluster of 16
# of 256 threads at 16 float4 at 256x262144. Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=docs/gpu-runs/2026-12-03-s17; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 240 python3 bench/family_quality.py --kernel softmax --points $d/sweep.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -16 | tee -a $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_user_family.py 2>&1 | tail -3 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
