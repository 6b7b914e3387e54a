#!/usr/bin/env bash
# at 553da7c: GPU campaigns (one shape set) at the eleven shapes of the softmax sweep with
# today's rule book (Triton's arrangements, the four code moves, packed rows), then
# bench/peer_quality.py: the campaigns' bests beside torch.softmax, torch.compile, the Triton
# launches and the same-bytes copy, flushed and sustained. Carry .whl (../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=553da7c TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r; log=$r/log.txt
shapes=65536x128,32768x512,16384x1024,65536x1024,8192x4096,8192x8192,4096x32768,2048x65536,1024x131072,16x262144,256x262144
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
t0=$(date +%s)
timeout -s KILL 265 python3 -m cli.main tune --backend gpu --kernel softmax --shapes "$shapes" \
  --budget 600 --wall-seconds 235 --db "$r/tune.db" --out /tmp/tfout --json \
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
tar czf $OUT/results.tgz -C $OUT r
timeout -s KILL 290 python3 bench/peer_quality.py --family softmax --campaigns "$r/tune.db" \
  --no-replay --out "$r/q" --budget-s 260 2>"$r/q-progress.txt" | tee -a $log | tail -16
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a $log
tar czf $OUT/results.tgz -C $OUT r && cp $log $OUT/log.txt && rm -rf $r
