#!/usr/bin/env bash
# Run 2026-12-03/4559075, call 4: N >= 4096's 90 % at the short end. Campaigns at 8192x4096 and 8192x8192
# (budget 100, 30 s; run 2026-12-03/e522bb1's sweep had them at 89.8 and 89.5 % of the copy rate), then
# the sweep in one run: sweep.json (run 2026-12-03/e522bb1's fastest point of each of the 11 shapes) and
# each campaign's best beside it. Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=runs/2026-12-03-4559075; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
for s in 8192x4096 8192x8192; do
  timeout -s KILL 70 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
    --wall-seconds 30 --db /tmp/r/softmax.db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
  python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('campaign $s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" 2>&1 | tee -a $log
done
python3 bench/replay_from_campaigns.py --kernel softmax --db /tmp/r/softmax.db --out /tmp/r/replay-s18-call4.jsonl.gz | tail -1 | tee -a $log
python3 - <<'PY'
import json
rows = json.load(open("runs/2026-12-03-4559075/sweep-points.json"))
for s in ("8192x4096", "8192x8192"):
    b = (json.load(open(f"/tmp/r/tune-{s}.json")).get("best") or {}).get("params")
    if b:
        rows.append({"label": "campaign s18", "shape": s, "params": b})
json.dump(rows, open("/tmp/r/sweep18.json", "w"), indent=1)
PY
timeout -s KILL 300 python3 bench/family_quality.py --kernel softmax --points /tmp/r/sweep18.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -18 | tee -a $log
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
