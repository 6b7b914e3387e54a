#!/usr/bin/env bash
# For the next session (<= 420 s of timeouts; not run yet): the push of a cluster's partials
# (apply_cluster_push, session 12, host-emulated only) on the H200. 1. GPU correctness of every
# transform's points (the push points among them); 2. each long-row campaign best of session 12
# beside its push twin (bench/family_quality.py, torch and the copy in the same run); 3. the
# campaigns again, the rule book now offering the push; their bests and the replay rows.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; db=/tmp/softmax.db; mkdir -p /tmp/r
timeout -s KILL 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -3 | tee -a $log
python3 - <<'PY' > /tmp/r/push-sweep.json
import json
pts = json.load(open("docs/gpu-runs/2026-12-02-s12/sweep.json"))
out = []
for e in pts:
    if e["params"].get("cluster", 1) > 1:
        out += [e, {**e, "label": e["label"] + " push", "params": {**e["params"], "push": True}}]
print(json.dumps(out))
PY
timeout -s KILL 120 python3 bench/family_quality.py --kernel softmax --points /tmp/r/push-sweep.json \
  --out /tmp/r/push --min-ms 200 2>>/tmp/r/err.txt | tail -12 | tee -a $log
for s in 2048x65536 1024x131072 256x262144 16x262144; do
  timeout -s KILL 50 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 80 \
    --wall-seconds 20 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 | \
    python3 -c "import json,sys; r=json.loads(sys.stdin.read() or '{}'); b=r.get('best') or {}; print('$s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
done
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-next.jsonl.gz | tail -1 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
