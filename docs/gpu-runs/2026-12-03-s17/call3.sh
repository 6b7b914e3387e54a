#!/usr/bin/env bash
# Session 17, call 3: wait_probe.py (the wait between loads and stores, pipelined or not). Is
# 256x262144 held at 85 % by its size (256 MB: a launch's ramp and tail
# weigh twice what they weigh at 512 MB) or by the cluster of 16? The best CTA (512 threads,
# 8 float4, two an SM) at 256, 512 and 1024 rows of 262144 (clusters of 16) and at 512 and
# 1024 rows of 131072 (clusters of 8); clusters of 16 at 1024x131072 (half the floats a thread,
# or 256 threads); a cluster of 8 of 1024 threads at 256x262144 (one CTA an SM, 128 KB, as
# call 2's fastest copy kernel); plain stores. shape_or_cluster.json. Then the GPU tests of the
# softmax family, the evaluator and user families. Argument: the commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=docs/gpu-runs/2026-12-03-s17; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 60 python3 $d/wait_probe.py 2>&1 | tail -7 | tee -a $log
timeout -s KILL 200 python3 bench/family_quality.py --kernel softmax --points $d/shape_or_cluster.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -14 | tee -a $log
# the GPU tests of the launch path this session changed (grid() and LaunchConfig.group)
timeout -s KILL 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py \
  tests/test_gpu_eval.py tests/test_gpu_user_family.py 2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
