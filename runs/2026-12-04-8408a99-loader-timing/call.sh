#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 8408a99: the loader's GPU tests three times with the flushed
# timings hiding the call's host time (022d293), then bench/loader_bench.py with the dispatch
# overhead taken within interleaved rounds (8408a99) on the loader of 14b1bae.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r
log=$r/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
for i in 1 2 3; do
  timeout -s KILL 90 python3 -m pytest -q -s -m gpu -p no:cacheprovider -rfE tests/test_gpu_loader.py \
    > $r/gpu_tests-$i.txt 2>&1
  echo "gpu tests $i: $(grep -E 'passed|failed|error' $r/gpu_tests-$i.txt | tail -1)" | tee -a $log
  grep -E "64x64x64|64x1024" $r/gpu_tests-$i.txt | head -4 | tee -a $log
done
timeout -s KILL 200 python3 bench/loader_bench.py --out $r --work /tmp/lb > $r/loader_bench.txt 2>&1
tail -9 $r/loader_bench.txt | tee -a $log
python3 -c "
import json, statistics
r = json.load(open('$r/loader_bench.json'))
for f, v in r['families'].items():
    o = v['overhead']
    print(f, {k: round(o[k], 2) for k in o if k.endswith('_us')})
    for k, t in o['rounds'].items():
        print('   ', k, ' '.join(f'{x:.2f}' for x in t))" | tee -a $log
