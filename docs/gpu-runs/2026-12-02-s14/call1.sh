#!/usr/bin/env bash
# Session 14, call 1 (<= 560 s of timeouts). 1. The launch-contract refactor of d35d186 on the
# GPU: compute-sanitizer and Nsight Compute on the split-pass GEMM best (its prologue launched
# through module_aux). 2. softmax push points after the early-loads change (the first row's
# loads before the cluster's first wait): GPU correctness, then the long-row points in the
# tree before it (.gpu/old, HEAD 0b1bd65) and after it, each beside torch and the copy.
# 3. Nsight Compute on two long-row points (where the rest of the time goes).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-02-s14; mkdir -p /tmp/r
best="$(cat docs/gpu-runs/2026-12-02-s13/call4/r/best-t1e-4.json)"
timeout -s KILL 70 python3 bench/sanitize_bests.py --kernel gemm_bias_relu --params "$best" \
  --shape 4096x4096x4096 --out /tmp/r/san 2>&1 | tail -3 | tee -a $log
timeout -s KILL 55 python3 bench/ncu_sections.py --out /tmp/r/ncu-gemm --label pass-best \
  --params "$best" 2>&1 | tail -6 | tee -a $log
timeout -s KILL 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution 2>&1 | tail -3 | tee -a $log
(cd .gpu/old && PYTHONPATH=/tmp/site:$PWD timeout -s KILL 110 python3 bench/family_quality.py --kernel softmax \
  --points ../../$d/long-rows.json --cache /tmp/cache-old --out /tmp/r/old --min-ms 200 2>>/tmp/r/err-old.txt | tail -13 | tee -a $log)
timeout -s KILL 110 python3 bench/family_quality.py --kernel softmax --points $d/long-rows.json \
  --cache /tmp/cache-new --out /tmp/r/new --min-ms 200 2>>/tmp/r/err-new.txt | tail -13 | tee -a $log
p1=$(python3 -c "import json; print(json.dumps(json.load(open('$d/long-rows.json'))[3]['params']))")
p2=$(python3 -c "import json; print(json.dumps(json.load(open('$d/long-rows.json'))[5]['params']))")
timeout -s KILL 45 python3 bench/ncu_sections.py --kernel softmax --shape 1024x131072 --out /tmp/r/ncu-sm \
  --label c8-push --params "$p1" 2>&1 | tail -4 | tee -a $log
timeout -s KILL 45 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu-sm2 \
  --label c8-2pass --params "$p2" 2>&1 | tail -4 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
