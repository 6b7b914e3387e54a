#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 5e23da5: the loader's GPU tests with launches through the
# driver's own cuLaunchKernel (ctypes) and the checks inside the repeat call; then
# bench/loader_bench.py on it (50 shapes a family) and on the loader before (loader.patch
# reversed; 6 shapes a family: only its overhead rounds are read), both with the two direct
# baselines (the bindings' launch and the driver's entry).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
d=runs/2026-12-04-5e23da5-loader-raw
r=$OUT/r; mkdir -p $r
log=$r/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python3 -c "import cuda.bindings, torch; print('cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)" | tee -a $log
timeout -s KILL 120 python3 -m pytest -q -s -m gpu -p no:cacheprovider -rfE tests/test_gpu_loader.py \
  > $r/gpu_tests.txt 2>&1
echo "gpu tests: $(grep -E 'passed|failed|error' $r/gpu_tests.txt | tail -1)" | tee -a $log
grep -E "dispatch adds" $r/gpu_tests.txt | tee -a $log
summary() {
python3 -c "
import json
r = json.load(open('$1/loader_bench.json'))
for f, v in r['families'].items():
    o = v['overhead']
    print('$2', f, {k: round(o[k], 2) for k in o if k.endswith('_us')})"
}
timeout -s KILL 220 python3 bench/loader_bench.py --out $r/after --work /tmp/lb > $r/after.txt 2>&1
tail -9 $r/after.txt | tee -a $log
summary $r/after after | tee -a $log
patch -s -R -p1 < $d/loader.patch && echo "loader reverted for the before run" | tee -a $log
timeout -s KILL 150 python3 bench/loader_bench.py --shapes 6 --out $r/before --work /tmp/lb-before > $r/before.txt 2>&1
summary $r/before before | tee -a $log
patch -s -p1 < $d/loader.patch
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
