#!/usr/bin/env bash
# On an H200 only (exits 3 at once on another GPU): a GPU shape set at the two softmax shapes
# where the 553da7c library (its campaigns ran on an H100) trailed Triton on the H200 in one
# timer (../2026-12-06-039710a-vendor-graph/: 0.89x at 4096x32768, 0.94x at 8192x8192), then
# its bests exported and timed through the loader beside the peers (peer_quality --bundle).
# Run as `call.sh COMMIT`, carry .whl; about 250 s.
commit=${1:?usage: call.sh COMMIT}
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit
r=$OUT/r; mkdir -p $r; log=$OUT/log.txt
shapes=4096x32768,8192x8192
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
timeout -s KILL 125 python3 -m cli.main tune --backend gpu --kernel softmax --shapes "$shapes" \
  --budget 240 --wall-seconds 105 --db "$r/tune.db" --out /tmp/tfout --json \
  2>"$r/tune-progress.txt" | tail -1 > "$r/tune.json"
echo "tune rc $? at $(( $(date +%s) - start ))s" | tee -a $log
python3 - "$r/tune.json" <<'PY' 2>&1 | tee -a $log
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("tune: no summary (killed?): the bests are still in tune.db")
print(f"tune: {r.get('status')} · {r.get('evaluations')} evaluations · {r.get('wall_seconds')} s")
for s in r.get("shapes", []):
    b = s.get("best") or {}
    print(f"  {s['shape']:>12s} {s.get('evaluations'):4} evals  best {b.get('avg_us')} us "
          f"{s.get('x_vendor')}x torch  {json.dumps(b.get('params'))}")
PY
python3 -m cli.main library export --kernel softmax --db $r/tune.db --out /tmp/lib 2>&1 | tail -1 | tee -a $log
timeout -s KILL 100 python3 bench/peer_quality.py --family softmax --campaigns $r/tune.db \
  --no-replay --bundle /tmp/lib --budget-s 80 --shapes $shapes --out $r/q \
  2>$r/progress.txt > $r/softmax.txt
echo "softmax rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -14 $r/softmax.txt
gzip -f $r/tune.db; cd $OUT && tar czf r.tgz r && rm -rf r
