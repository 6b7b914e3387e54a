#!/usr/bin/env bash
# Session 17, call 2: 1. How fast the SMs copy 256 MB (copy_probe.py: tiles and grid-stride
# loops, threads, vectors, cache hints, beside cuMemcpyDtoD at 256 MB and 1 GB). 2. Spread
# groups of 32 CTAs and of 1024-thread CTAs at 16x262144 beside the cluster of 16 (spread32.json).
# 3. compute-sanitizer memcheck on the spread picks at 16x262144. 4. A campaign at 16x262144
# (the rule book offering spread there) and its replay rows. Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=docs/gpu-runs/2026-12-03-s17; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 120 python3 $d/copy_probe.py 2>&1 | tail -19 | tee -a $log
timeout -s KILL 120 python3 bench/family_quality.py --kernel softmax --points $d/spread32.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -10 | tee -a $log
pts=$(python3 -c "
import json, sys
sys.path.insert(0, 'tests')
from softmax_bulk_points import SPREAD_PICKS
for p in SPREAD_PICKS.values():
    print(\"--params '\" + json.dumps(p.to_dict()) + \"'\")
" | tr '\n' ' ')
eval timeout -s KILL 150 python3 bench/sanitize_bests.py --kernel softmax --tools memcheck \
  --shape 16x262144 --out /tmp/r/san $pts 2>&1 | tail -6 | tee -a $log
s=16x262144
timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
  --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('campaign $s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s17.jsonl.gz | tail -1 | tee -a $log
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
