#!/usr/bin/env bash
# Session 14, call 4 (<= 420 s of timeouts): the campaign at 256x262144 again with the rule
# book's new move (a CTA alone on its SM at the largest cluster: twice the threads at half the
# floats), its replay rows, then the sweep of every shape's campaign best in one run beside
# torch and the copy (session 12's sweep, call 3's bests at the long rows, this call's at
# 256x262144).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-02-s14; db=/tmp/softmax.db; mkdir -p /tmp/r
s=256x262144
timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
  --wall-seconds 30 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('$s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-s14b.jsonl.gz | tail -1 | tee -a $log
python3 - <<'PY' > /tmp/r/sweep.json
import json
pts = json.load(open("docs/gpu-runs/2026-12-02-s12/sweep.json"))
out = []
for e in pts:
    for where in (f"/tmp/r/tune-{e['shape']}.json", f"docs/gpu-runs/2026-12-02-s14/call3/tune-{e['shape']}.json"):
        try:
            r = json.load(open(where))
            out.append({"label": "s14 campaign", "shape": e["shape"], "params": r["best"]["params"]})
            break
        except (OSError, KeyError, TypeError, ValueError):
            continue
    else:
        out.append(e)
print(json.dumps(out))
PY
timeout -s KILL 320 python3 bench/family_quality.py --kernel softmax --points /tmp/r/sweep.json \
  --out /tmp/r/sweep --min-ms 200 2>>/tmp/r/err.txt | tail -16 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
