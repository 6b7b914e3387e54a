#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 11e5fbf: the 8-shape GEMM set of 440 evaluations (the separate
# campaigns of 160 from runs/2026-12-04-23167d9-gemm-set), submitted again four times on
# copies of the first submission's database (Alembic skipped at the head since 11e5fbf), then a
# fifth time under py-spy (every thread, idle frames included, raw stacks).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r
shapes=4096x4096x4096:3,2048x2048x8192,3000x5000x2000,2048x2048x2048,1024x4096x4096,16384x1024x1024,128x4096x4096,1024x1024x1024
SEPARATE_FROM=$PWD/runs/2026-12-04-23167d9-gemm-set/a/sets-gemm/shape-sets.json \
  GEMM_SHAPES=$shapes GEMM_BUDGET=160 GEMM_SET_BUDGET=440 AGAIN_RUNS=4 HELD_OUT=0 TOTAL_S=300 \
  OUT=$r bash bench/gpu_sets_heldout.sh gemm > $r/sets.txt 2>&1
grep -E "set_again|submissions|targets|worst" $r/sets.txt | head -6
keep=$(ls -d /tmp/sets-heldout.*/gemm | head -1)
cp $keep/set-first.db /tmp/spy.db; for f in $keep/set-first.db-wal $keep/set-first.db-shm; do [ -f $f ] && cp $f /tmp/spy.db-${f##*-}; done
s=$(date +%s%N)
TUNEFORGE_HOME=$keep timeout 90 /tmp/site/bin/py-spy record --idle --threads --rate 100 --format raw \
  -o $r/pyspy.raw -- python3 -m cli.main tune --kernel gemm_bias_relu --backend gpu --shapes $shapes \
  --budget 440 --db /tmp/spy.db --out /tmp/spyout --json > $r/spy.json 2>$r/spy.err
echo "under py-spy: $(( ($(date +%s%N) - s) / 1000000 )) ms"
python3 -c "
import json; r = json.load(open('$r/spy.json')); print({k: r.get(k) for k in ('evaluations', 'served_from_history', 'gpu_seconds', 'wall_seconds')})"
gzip $r/pyspy.raw
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
