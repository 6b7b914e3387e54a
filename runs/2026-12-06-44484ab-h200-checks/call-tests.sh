#!/usr/bin/env bash
# at 44484ab's code, on an H200 only (exits 3 at once on another GPU), when the device time left
# no longer held call.sh: its first part alone, the six GPU tests not yet run on an H200.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
timeout 175 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 \
  tests/test_gpu_softmax.py::test_plans_beside_torch tests/test_gpu_user_family.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -14 $OUT/pytest.txt
