#!/usr/bin/env bash
# at 3719632: GPU campaigns (one shape set, from the naive baseline) at the GEMM's four headline
# shapes, then bench/peer_quality.py: the set's bests beside cuBLAS fp32, the four cuBLAS bf16x3
# compositions (the compiled one per shape) and Triton bf16x3, flushed and sustained.
# Carry .whl (../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=3719632 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r; log=$r/log.txt
shapes=4096x4096x4096,8192x8192x8192,3000x5000x2000,2048x2048x8192
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
t0=$(date +%s)
timeout -s KILL 270 python3 -m cli.main tune --backend gpu --kernel gemm_bias_relu --shapes "$shapes" \
  --budget 400 --wall-seconds 240 --db "$r/tune.db" --out /tmp/tfout --json \
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
    print(f"  {s['shape']:>16s} {s.get('evaluations'):4} evals  best {b.get('avg_us')} us "
          f"{s.get('x_vendor')}x cuBLAS")
PY
echo "campaigns done at $(( $(date +%s) - t0 )) s" | tee -a $log
tar czf $OUT/results.tgz -C $OUT r
timeout -s KILL 220 python3 bench/peer_quality.py --family gemm_bias_relu --campaigns "$r/tune.db" \
  --no-replay --out "$r/q" --budget-s 200 2>"$r/q-progress.txt" | tee -a $log | tail -9
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a $log
gzip -9 $r/tune.db
tar czf $OUT/results.tgz -C $OUT r && cp $log $OUT/log.txt && rm -rf $r
