#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 9743baf: the loader's GPU tests and bench/loader_bench.py after the
# repeat fallback call went straight to the vendor operator (5034143), then the softmax gap
# experiment (runs/2026-12-04-52cf814-softmax-gap/call.sh: max_first and ptx_stores beside
# Triton, Nsight Compute at 16384x1024). One tar comes back.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r
log=$r/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_loader.py \
  > $r/gpu_tests.txt 2>&1
grep -E "passed|failed|error" $r/gpu_tests.txt | tail -4 | tee -a $log
timeout -s KILL 170 python3 bench/loader_bench.py --out $r --work /tmp/lb > $r/loader_bench.txt 2>&1
tail -9 $r/loader_bench.txt | tee -a $log
mkdir -p $r/gap
OUT=$r/gap timeout -s KILL 250 bash runs/2026-12-04-52cf814-softmax-gap/call.sh > /dev/null 2>&1
tail -60 $r/gap/script.txt | tee -a $log
tar -C $OUT -czf $OUT/out.tgz r && rm -rf $r
