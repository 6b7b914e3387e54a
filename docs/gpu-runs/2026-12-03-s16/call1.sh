#!/usr/bin/env bash
# Session 16, call 1 (<= 560 s of timeouts): the prefetching bulk-copy kernel (apply_prefetch,
# persistent grids cut by the driver's occupancy). 1. GPU correctness of the bulk and
# prefetching points (persistent grids, several tiles a CTA). 2. The resident CTAs the driver
# reports. 3. The prefetch points beside the session-14 bests, torch and the copy (sustained
# runs with the sustain-at-least change: total_ms >= 200). 4. A campaign at 256x262144 and
# its replay rows. Argument: the commit of the tree.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-03-s16; mkdir -p /tmp/r
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_gpu_softmax.py::test_bulk_points_correct_on_awkward_shapes_and_every_distribution \
  tests/test_gpu_softmax.py::test_the_driver_counts_the_resident_ctas_of_a_persistent_launch 2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
timeout -s KILL 60 python3 $d/resident.py 2>&1 | tail -12 | tee -a $log
timeout -s KILL 170 python3 bench/family_quality.py --kernel softmax --points $d/prefetch.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -14 | tee -a $log
python3 -c "
import json
for r in json.load(open('/tmp/r/quality/quality.json'))['rows']:
    print(r['shape'], r['label'], 'sustained ms', r['sustained'].get('total_ms'), 'vendor', r['vendor'].get('sustained_ms'))
" 2>&1 | tee -a $log
timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape 256x262144 --budget 100 \
  --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-256x262144.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-256x262144.json')); b=r.get('best') or {}; print('campaign', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s16.jsonl.gz | tail -1 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
