#!/usr/bin/env bash
# Run 2026-12-03/4559075, call 2 (call 1 again on the tagged slots): the pipelined spread group (apply_row_pipeline: a CTA loads its next
# row's part before the wait for this row's (max, sum)). 1. The picks beside each shape's best
# (pipeline.json), flushed and sustained, beside torch and the copy. 2. The campaign at
# 256x262144 with the rule book offering the move, and its replay rows. 3. The softmax GPU
# tests (every transform's points and the picks, correctness). 4. compute-sanitizer memcheck
# on the pipelined picks at 16x262144 (two rows a group of 32). Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=runs/2026-12-03-4559075; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 200 python3 bench/family_quality.py --kernel softmax --points $d/pipeline.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -15 | tee -a $log
s=256x262144
timeout -s KILL 70 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
  --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('campaign $s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s18-call2.jsonl.gz | tail -1 | tee -a $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py \
  2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
pts=$(python3 -c "
import json, sys
sys.path.insert(0, 'tests')
from softmax_bulk_points import SPREAD_PICKS
for p in SPREAD_PICKS.values():
    if p.pipeline: print(\"--params '\" + json.dumps(p.to_dict()) + \"'\")
" | tr '\n' ' ')
eval timeout -s KILL 100 python3 bench/sanitize_bests.py --kernel softmax --tools memcheck \
  --shape 16x262144 --out /tmp/r/san $pts 2>&1 | tail -6 | tee -a $log
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
