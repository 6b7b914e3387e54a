#!/usr/bin/env bash
# Run as `call.sh COMMIT` (carry .whl): on an H200, the H200 checks of #38 first
# (../2026-12-06-44484ab-h200-checks/call.sh, into $OUT/h200), then, in the time left of a
# 600 s call, the GPU tests of the vendor harness's graph check (039710a); on any other GPU
# those tests alone: tests/test_gpu_vendor.py and the peers' harness timing the library
# (tests/test_gpu_loader.py -k peers_harness), which measure_torch times with its graph.
commit=${1:?usage: call.sh COMMIT}
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
if [[ "$name" == *H200* ]]; then
  mkdir -p $OUT/h200
  OUT=$OUT/h200 bash runs/2026-12-06-44484ab-h200-checks/call.sh "$commit"
fi
left=$(( 560 - ($(date +%s) - start) ))
if (( left < 60 )); then echo "no time left for the vendor tests"; exit 0; fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit TUNEFORGE_GPU_OUT=$OUT/vendor
mkdir -p $OUT/vendor
echo "vendor tests get $(( left > 240 ? 240 : left ))s"
timeout $(( left > 240 ? 240 : left )) python3 -m pytest -m gpu -q -p no:cacheprovider --durations=6 \
  tests/test_gpu_vendor.py tests/test_gpu_loader.py -k "vendor or graph or peers_harness" \
  > $OUT/vendor/pytest.txt 2>&1
echo "vendor tests rc $? at $(( $(date +%s) - start ))s"; tail -12 $OUT/vendor/pytest.txt
python3 - <<'PY'
import json, os
p = os.path.join(os.environ["OUT"], "vendor", "vendor_graph_check.json")
if os.path.exists(p):
    for k, v in json.load(open(p)).items():
        print(f"{k:11s} loop {v.get('loop_us', 0):9.2f} us  graph {v.get('graph_us', float('nan')):9.2f} us"
              f"  check {v.get('graph_check', {}).get('rel_err', '-')}  {v.get('graph_error', '')[:60]}")
PY
