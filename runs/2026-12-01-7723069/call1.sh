#!/usr/bin/env bash
# Run 2026-12-01/7723069, the one GPU call (about 890 s of device time were left after a failed start):
# issue 21's GPU tests first (timer cheats and faulty kernels; the example user family, its
# campaign), then the softmax checks (run 2026-12-01/8ba5b81's -inf select guard, the bulk-copy points),
# then the bf16 splits' speed and calibration in what is left. Each step has its own limit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu PYTHONUNBUFFERED=1
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
step() {  # step LIMIT NAME CMD...: run with a limit, keep the output, print its tail
  local limit=$1 name=$2; shift 2
  local left=$(( ${TOTAL:-575} - SECONDS ))
  [ $left -lt 15 ] && { echo "== $name: skipped (no time left)" | tee -a $log; return; }
  [ $limit -gt $left ] && limit=$left
  echo "== $name (limit ${limit}s, at ${SECONDS}s)" | tee -a $log
  timeout -s KILL $limit "$@" > $OUT/$name.txt 2>&1
  echo "rc $?" >> $OUT/$name.txt
  tail -6 $OUT/$name.txt | cut -c1-300 | tee -a $log
}
step 100 cheat-faults python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_gpu_cheat.py tests/test_gpu_campaign_faults.py
step 210 user-family python3 -m pytest -q -m gpu -p no:cacheprovider -rA tests/test_gpu_user_family.py
step 95 softmax-checks python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution" \
  "tests/test_gpu_softmax.py::test_bulk_points_correct_on_awkward_shapes_and_every_distribution"
step 130 bf16-speed python3 bench/precision_speed.py --min-ms 200 --out $OUT/speed
step 45 bf16-calibration python3 bench/precision_calibration.py --out $OUT/calib
echo "total ${SECONDS} s" | tee -a $log
