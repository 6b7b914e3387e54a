#!/usr/bin/env bash
# Session 13, call 4 (<= 570 s of timeouts): GEMM campaigns from the seed's baseline with the
# split pass in the rule book. 1. 4096³ at the default tolerance 1e-4 and 2. at 1e-5 (the rule
# book must not offer bf16x3 there); 3. 8192³ warm-started from the best so far; 4. the bests
# beside cuBLAS fp32 and the three-cuBLAS-bf16 composition, flushed and sustained >= 200 ms
# (bench/precision_speed.py); 5. the campaigns' candidates as replay rows.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; db=/tmp/gemm.db; mkdir -p /tmp/r
summ='import json,sys; r=json.loads(sys.stdin.read() or "{}"); b=r.get("best") or {}; open(sys.argv[1],"w").write(json.dumps(b.get("params"))); print(sys.argv[2], r.get("evaluations"), r.get("wall_seconds"), b.get("avg_us"), r.get("vendor_us"), r.get("pct_of_vendor"), b.get("iteration"), json.dumps(b.get("params"), sort_keys=True))'
run() {  # label timeout args...
  local label=$1 t=$2; shift 2
  timeout -s KILL $t python3 -m cli.main tune --backend gpu --db $db --out /tmp/r/out-$label --json "$@" \
    2>/tmp/r/tune-$label.err | tee /tmp/r/tune-$label.txt | tail -1 | python3 -c "$summ" /tmp/r/best-$label.json $label | tee -a $log
}
run t1e-4 160 --shape 4096x4096x4096 --budget 400 --wall-seconds 140 --tolerance 1e-4
run t1e-5 130 --shape 4096x4096x4096 --budget 400 --wall-seconds 110 --tolerance 1e-5
run s8192 100 --shape 8192x8192x8192 --budget 40 --wall-seconds 80 --tolerance 1e-4 --start-from best
args=()
for l in t1e-4 t1e-5 s8192; do
  [ -s /tmp/r/best-$l.json ] && [ "$(cat /tmp/r/best-$l.json)" != null ] && args+=(--label "campaign $l" --params "$(cat /tmp/r/best-$l.json)")
done
timeout -s KILL 150 python3 bench/precision_speed.py --min-ms 200 --out /tmp/r/speed \
  --shapes 4096x4096x4096,8192x8192x8192 "${args[@]}" 2>/tmp/r/speed-err.txt | tee -a $log
timeout -s KILL 20 python3 bench/replay_from_campaigns.py --kernel gemm_bias_relu --db $db \
  --out /tmp/r/replay-gemm.jsonl.gz 2>&1 | tail -4 | tee -a $log
cp $db /tmp/r/
tar czf $OUT/r.tgz -C /tmp r
