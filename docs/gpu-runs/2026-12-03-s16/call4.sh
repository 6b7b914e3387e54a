#!/usr/bin/env bash
# Session 16, call 4 (<= 380 s of timeouts): 1. GPU correctness of every transform's points
# (set_min_ctas's and the staged picks among them). 2. The campaign at 256x262144 with the rule
# book as it now stands (no prefetch, staged or min_ctas move), its replay rows. 3.
# compute-sanitizer memcheck and racecheck on the fastest point of every shape of the replay
# dataset (session 14's push and cluster-16 bests have not been through it) and on a staged,
# a four-CTA and a prefetching point. 4. Nsight Compute on the 256x262144 best.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-03-s16; mkdir -p /tmp/r
timeout -s KILL 60 python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -3 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
s=256x262144
timeout -s KILL 55 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
  --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('campaign', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s16b.jsonl.gz 2>&1 | tail -1 | tee -a $log
timeout -s KILL 130 python3 bench/sanitize_bests.py --kernel softmax --out /tmp/r/san 2>&1 | tail -13 | tee -a $log
pts=$(python3 -c "
import json, sys
sys.path.insert(0, 'tests')
from softmax_bulk_points import PREFETCH_PICKS, STAGED_PICKS
for p in (STAGED_PICKS['c8x512s8'], STAGED_PICKS['c16x256s8m4'], PREFETCH_PICKS['c16x512h8']):
    print(\"--params '\" + json.dumps(p.to_dict()) + \"'\")
" | tr '\n' ' ')
eval timeout -s KILL 70 python3 bench/sanitize_bests.py --kernel softmax --shape 24x65536 --out /tmp/r/san2 $pts 2>&1 | tail -5 | tee -a $log
p=$(python3 -c "import json; print(json.dumps(json.load(open('/tmp/r/tune-$s.json'))['best']['params']))")
timeout -s KILL 45 python3 bench/ncu_sections.py --kernel softmax --shape $s --out /tmp/r/ncu \
  --label best --params "$p" 2>&1 | tail -8 | tee -a $log
rm -f /tmp/r/softmax.db.bak; tar czf $OUT/r.tgz -C /tmp r
