#!/usr/bin/env bash
# Session 12, call 7 (<= 170 s of timeouts): the vendor harness running the child's own
# tf_poison and tf_flush (worker/vendor.py --flush child, pycuda in torch's context) against the
# lerp flush; our 65536x128 best in both harnesses with the same kernels before each launch; the
# softmax GPU test that times the plans beside torch through the evaluator's vendor.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
for fs in "softmax 65536x128" "softmax 32768x512" "gemm_bias_relu 4096x4096x4096"; do
  set -- $fs
  for mode in child lerp child lerp; do
    r=$(timeout -s KILL 40 python3 -m worker.vendor --family $1 $2 --flush $mode | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(r.get('avg_us', r.get('error')), r.get('flush'), r.get('poisoned_outputs'))")
    echo "$1 $2 $mode: $r"
  done
done
B128='{"block_threads": 128, "chunks": 4, "cluster": 1, "load_hint": 0, "passes": 1, "row_threads": 8, "store_hint": false, "unroll": 1, "vec": 4}'
timeout -s KILL 50 python3 bench/harness_check.py --kernel softmax --shape 65536x128 --params "$B128" 2>&1 | tail -3
timeout -s KILL 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py::test_plans_beside_torch 2>&1 | tail -2
