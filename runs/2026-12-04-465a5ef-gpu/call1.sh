#!/usr/bin/env bash
# 2026-12-04, call 1 on nvidia-h200: the GPU tests after the one campaign driver (every
# gpu-marked file), the embedded GPU throughput at 200 evaluations, and a softmax shape set
# on the GPU submitted twice (the second must cost 0 GPU-seconds). Short table last.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; mkdir -p /tmp/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_eval.py \
  tests/test_gpu_cheat.py tests/test_gpu_softmax.py tests/test_gpu_campaign_faults.py \
  tests/test_gpu_split_k.py tests/test_gpu_stream_k.py tests/test_gpu_wgmma.py \
  tests/test_gpu_frag_prefetch.py tests/test_gpu_async_copy.py tests/test_sanitize.py \
  tests/test_gpu_user_family.py --durations=15 > $OUT/gpu-tests.log 2>&1
tail -25 $OUT/gpu-tests.log | tee -a $log
t0=$(date +%s.%N)
timeout -s KILL 90 python3 -m cli.main tune --backend gpu --budget 200 --db /tmp/r/t.db \
  --out /tmp/r/o --json 2>/tmp/r/tune-err.txt | tail -1 > $OUT/tune-200.json
t1=$(date +%s.%N)
python3 -c "import json; r=json.load(open('$OUT/tune-200.json')); b=r['best'] or {}; print('tune 200: %s evals in %.1f s wall (%.0f/min), best %s us %s x cuBLAS, gpu_s %s' % (r['evaluations'], $t1-$t0, 60*r['evaluations']/($t1-$t0), b.get('avg_us'), r.get('pct_of_vendor'), r['gpu_seconds']))" 2>&1 | tee -a $log
for i in 1 2; do
  s0=$(date +%s.%N)
  timeout -s KILL 80 python3 -m cli.main tune --backend gpu --kernel softmax \
    --shapes 8192x8192:2,16384x1024,65536x128,4096x32768 --budget 120 --db /tmp/r/s.db \
    --out /tmp/r/o --json 2>>/tmp/r/tune-err.txt | tail -1 > $OUT/set-$i.json
  s1=$(date +%s.%N)
  python3 -c "import json; r=json.load(open('$OUT/set-$i.json')); print('set $i: %.1f s wall, %s evals, %s GPU-s, %s served;' % ($s1-$s0, r['evaluations'], r['gpu_seconds'], r['served_from_history']), ' '.join('%s %.1fus %sx' % (x['shape'], (x['best'] or {}).get('avg_us') or 0, x['x_vendor']) for x in r['shapes']))" 2>&1 | tee -a $log
done
tail -5 /tmp/r/tune-err.txt >> $log
