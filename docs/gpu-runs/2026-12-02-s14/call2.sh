#!/usr/bin/env bash
# Session 14, call 2 (<= 480 s of timeouts): do cluster launches leave SMs idle? Nsight Compute
# on long-row points of several cluster sizes and CTA sizes (the clusters that fit at once, each
# SM's active cycles), then the same points beside torch and the copy. Also the push kernels'
# relaxed first arrival: GPU correctness of every transform's points.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-02-s14; mkdir -p /tmp/r
timeout -s KILL 100 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -2 | tee -a $log
python3 - <<'PY' > /tmp/r/groups.txt
import json, collections
g = collections.OrderedDict()
for e in json.load(open("docs/gpu-runs/2026-12-02-s14/occupancy.json")):
    g.setdefault(e["shape"], []).append(e)
for shape, es in g.items():
    args = " ".join(f"--label {e['label']} --params '{json.dumps(e['params'])}'" for e in es)
    print(f"{shape}|{args}")
PY
while IFS='|' read -r shape args; do
  eval timeout -s KILL 80 python3 bench/ncu_sections.py --kernel softmax --shape $shape \
    --out /tmp/r/ncu-$shape $args 2>&1 | grep -v "^  pipes" | tee -a $log
done < /tmp/r/groups.txt
timeout -s KILL 120 python3 bench/family_quality.py --kernel softmax --points $d/occupancy.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -12 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
