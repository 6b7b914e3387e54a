#!/usr/bin/env bash
# Session 14, call 3 (<= 540 s of timeouts): softmax campaigns again at the four long-row shapes
# (tree c76fa3f: the push kernels' relaxed first arrival), their replay rows, then the sweep of
# every shape's campaign best in one run beside torch and the copy (session 12's sweep with this
# call's bests at the long rows). Last, what pycuda offers for non-portable cluster sizes.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=c76fa3f
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-02-s14; db=/tmp/softmax.db; mkdir -p /tmp/r
for s in 2048x65536 1024x131072 256x262144 16x262144; do
  timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
    --wall-seconds 30 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
  python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('$s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
done
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-s14.jsonl.gz | tail -1 | tee -a $log
python3 - <<'PY' > /tmp/r/sweep.json
import json
pts = json.load(open("docs/gpu-runs/2026-12-02-s12/sweep.json"))
out = []
for e in pts:
    try:
        r = json.load(open(f"/tmp/r/tune-{e['shape']}.json"))
        out.append({"label": "s14 campaign", "shape": e["shape"], "params": r["best"]["params"]})
    except (OSError, KeyError, TypeError, ValueError):
        out.append(e)
print(json.dumps(out))
PY
timeout -s KILL 150 python3 bench/family_quality.py --kernel softmax --points /tmp/r/sweep.json \
  --out /tmp/r/sweep --min-ms 200 2>>/tmp/r/err.txt | tail -16 | tee -a $log
python3 -c "
import pycuda.driver as d
print('function_attribute:', [n for n in dir(d.function_attribute) if not n.startswith('_')])
print('Function attrs:', [n for n in dir(d.Function) if not n.startswith('_')])
print('Module attrs:', [n for n in dir(d.Module) if not n.startswith('_')])
" 2>&1 | tee -a $log
cp $db /tmp/r/ 2>/dev/null; tar czf $OUT/r.tgz -C /tmp r
