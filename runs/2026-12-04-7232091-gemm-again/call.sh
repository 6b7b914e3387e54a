#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 7232091: the 8-shape GEMM set of 440 evaluations (the separate
# campaigns of 160 taken from runs/2026-12-04-23167d9-gemm-set), then submitted again five
# times, each on a copy of the first submission's database (a served evaluation's host work
# cut at 1b6877a); then a 60-evaluation softmax campaign at 65536x128 with the packed-rows move
# (f6d460a).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r
SEPARATE_FROM=$PWD/runs/2026-12-04-23167d9-gemm-set/a/sets-gemm/shape-sets.json \
  GEMM_BUDGET=160 GEMM_SET_BUDGET=440 AGAIN_RUNS=5 HELD_OUT=0 TOTAL_S=330 OUT=$r \
  bash bench/gpu_sets_heldout.sh gemm > $r/sets.txt 2>&1
tail -20 $r/sets.txt
python3 -c "
import json; r = json.load(open('$r/sets-gemm/shape-sets.json'))
a = r['totals'].get('set_again', {}); print(json.dumps({k: v for k, v in a.items() if k != 'shapes'}, indent=1)[:1500])
print('targets', r.get('targets'))"
timeout -s KILL 120 python3 -m cli.main tune --backend gpu --kernel softmax --shape 65536x128 \
  --budget 60 --db $r/sm.db --out /tmp/tfout --json 2>$r/sm-progress.txt | tail -1 > $r/sm.json
python3 -c "
import json; r = json.load(open('$r/sm.json')); b = r['best']
print('softmax 65536x128:', r['evaluations'], 'evals', b['avg_us'], 'us', r.get('x_vendor'), 'x torch', json.dumps(b['params'], sort_keys=True))"
rm -f $r/sm.db; find $r -name "*.db" -delete
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
