#!/usr/bin/env bash
# Session 14, call 5 (<= 330 s of timeouts): clusters of 16 CTAs (non-portable: the launch
# config's cluster_size, the launcher's attribute). 1. GPU correctness of every transform's
# points (apply_cluster(16) among them; the plans at 256x262144 and 16x262144 are clusters of
# 16). 2. The campaigns at those two shapes again. 3. Their bests beside hand-set cluster-16
# points and the earlier bests, in one run beside torch and the copy.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-02-s14; db=/tmp/softmax.db; mkdir -p /tmp/r
timeout -s KILL 90 python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -4 | tee -a $log
grep -q "1 passed" $log || { tar czf $OUT/r.tgz -C /tmp r; exit 1; }
for s in 256x262144 16x262144; do
  timeout -s KILL 50 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
    --wall-seconds 25 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
  python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('$s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
done
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-s14c.jsonl.gz | tail -1 | tee -a $log
python3 - <<'PY' > /tmp/r/points.json
import json
pts = json.load(open("docs/gpu-runs/2026-12-02-s14/cluster16.json"))
for s in ("256x262144", "16x262144"):
    try:
        pts.append({"label": "s14 call-5 campaign", "shape": s,
                    "params": json.load(open(f"/tmp/r/tune-{s}.json"))["best"]["params"]})
    except (OSError, KeyError, TypeError, ValueError):
        pass
print(json.dumps(pts))
PY
timeout -s KILL 110 python3 bench/family_quality.py --kernel softmax --points /tmp/r/points.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -12 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
