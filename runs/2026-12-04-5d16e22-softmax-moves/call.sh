#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 5d16e22: GPU campaigns (one shape set) at the seven softmax
# shapes where a peer was ahead, with the rule book offering aligned_rows and one_pass_grid
# (7d9252f), then bench/peer_quality.py: the campaigns' bests beside torch.softmax,
# torch.compile, the Triton row kernel and the same-bytes copy, flushed and sustained.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=5d16e22 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r; log=$r/log.txt
shapes=65536x128,32768x512,16384x1024,65536x1024,8192x4096,8192x8192,4096x32768
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
t0=$(date +%s)
timeout -s KILL 260 python3 -m cli.main tune --backend gpu --kernel softmax --shapes "$shapes" \
  --budget 420 --wall-seconds 230 --db "$r/tune.db" --out /tmp/tfout --json \
  2>"$r/tune-progress.txt" | tail -1 > "$r/tune.json"
python3 - "$r/tune.json" <<'PY' 2>&1 | tee -a $log
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("tune: no summary (killed?): the campaigns' bests are still in tune.db")
print(f"tune: {r.get('status')} · {r.get('evaluations')} evaluations · {r.get('gpu_seconds')} "
      f"GPU-s · {r.get('wall_seconds')} s")
for s in r.get("shapes", []):
    b = s.get("best") or {}
    p = b.get("params") or {}
    moves = ",".join(k for k in ("max_first", "ptx_stores", "aligned_rows", "one_pass_grid") if p.get(k))
    print(f"  {s['shape']:>12s} {s.get('evaluations'):4} evals  best {b.get('avg_us')} us "
          f"{s.get('x_vendor')}x torch  {moves}")
PY
echo "campaigns done at $(( $(date +%s) - t0 )) s" | tee -a $log
timeout -s KILL 230 python3 bench/peer_quality.py --family softmax --campaigns "$r/tune.db" \
  --shapes "$shapes" --no-replay --out "$r/q" --budget-s 200 2>"$r/q-progress.txt" \
  | tee -a $log | tail -14
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a $log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
