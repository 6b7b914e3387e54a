#!/usr/bin/env bash
# Session 16, call 2 (<= 560 s of timeouts): the staged row (apply_staged_row: part of each
# thread's share of the row in shared memory by cp.async, so that a row takes half the
# cluster). Call 1 found the prefetching bulk points slower, and the 256x262144 best held to
# 14 resident clusters of 16 (112 of 132 SMs: 85.8 % of the copy rate). 1. GPU correctness of
# every transform's points (staged ones among them). 2. Resident CTAs. 3. Staged points beside
# the bests, torch and the copy. 4. The campaign at 256x262144, its replay rows.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-03-s16; mkdir -p /tmp/r
timeout -s KILL 150 python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
timeout -s KILL 60 python3 $d/resident.py staged.json 2>&1 | tail -10 | tee -a $log
timeout -s KILL 150 python3 bench/family_quality.py --kernel softmax --points $d/staged.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -12 | tee -a $log
s=256x262144
timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
  --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('campaign', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s16.jsonl.gz 2>&1 | tail -1 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
