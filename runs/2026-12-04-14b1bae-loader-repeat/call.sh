#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 14b1bae: the loader's repeat call as one bound function
# (loader.patch, against a7361cb). The loader's GPU tests three times (their flushed bound at
# the GEMM's 64^3 entry hides the call's host time behind the L2 flush), bench/loader_bench.py
# in full, then the dispatch overhead of the loader before and after, alternating, two
# each (--shapes 4: the overhead is measured at the small entry whatever the shape count).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
rec=runs/2026-12-04-14b1bae-loader-repeat
r=$OUT/r; mkdir -p $r
log=$r/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
for i in 1 2 3; do
  timeout -s KILL 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_loader.py \
    > $r/gpu_tests-$i.txt 2>&1
  echo "gpu tests $i: $(grep -E 'passed|failed|error' $r/gpu_tests-$i.txt | tail -1)" | tee -a $log
done
timeout -s KILL 170 python3 bench/loader_bench.py --out $r --work /tmp/lb > $r/loader_bench.txt 2>&1
tail -9 $r/loader_bench.txt | tee -a $log
overhead() {  # $1: label
  mkdir -p $r/ab-$1
  timeout -s KILL 60 python3 bench/loader_bench.py --shapes 4 --out $r/ab-$1 --work /tmp/lb-$1 \
    > $r/ab-$1/out.txt 2>&1
  python3 -c "
import json, sys
r = json.load(open('$r/ab-$1/loader_bench.json'))
for f, v in r['families'].items():
    o = v['overhead']
    print(f'$1 {f:15} loader {o[\"loader_us\"]:5.2f} direct {o[\"direct_us\"]:5.2f} '
          f'direct+alloc {o[\"direct_allocating_us\"]:5.2f}  over bare {o[\"added_us\"]:5.2f}  '
          f'over launch+alloc {o[\"dispatch_us\"]:5.2f} us')" 2>&1 | tee -a $log
}
for i in 1 2; do
  git apply -R $rec/loader.patch && overhead before-$i && git apply $rec/loader.patch
  overhead after-$i
done
git diff --stat -- agent/bundle_files 2>/dev/null | tail -1
