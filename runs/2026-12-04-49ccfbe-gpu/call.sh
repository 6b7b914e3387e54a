#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 49ccfbe: the GPU tests of the paths changed today (the campaign
# driver's served evaluations in one transaction, the start-up's Alembic shortcut: the
# campaign fault tests; the softmax family and the loader), then the embedded GPU throughput
# at 200 evaluations (179 a minute at 465a5ef).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r /tmp/r; log=$r/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 250 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_campaign_faults.py \
  tests/test_gpu_softmax.py tests/test_gpu_loader.py --durations=8 > $r/gpu-tests.txt 2>&1
tail -14 $r/gpu-tests.txt | tee -a $log
t0=$(date +%s%N)
timeout -s KILL 100 python3 -m cli.main tune --backend gpu --budget 200 --db /tmp/r/t.db \
  --out /tmp/r/o --json 2>/tmp/r/tune-err.txt > $r/tune-200.json
t1=$(date +%s%N)
python3 -c "
import json; t = open('$r/tune-200.json').read(); r = json.JSONDecoder().raw_decode(t[t.index('{'):])[0]
w = ($t1 - $t0) / 1e9; b = r['best'] or {}
print('tune 200: %s evals in %.1f s wall (%.0f/min), best %s us, gpu_s %s' % (r['evaluations'], w, 60 * r['evaluations'] / w, b.get('avg_us'), r['gpu_seconds']))" 2>&1 | tee -a $log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
