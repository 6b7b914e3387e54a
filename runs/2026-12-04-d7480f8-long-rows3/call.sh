#!/bin/bash
# the long rows' copy beside its read half (a load-only kernel) and write half; then the
# loader's GPU tests (bench/loader_timing's vendor now addmm + relu_)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
python3 bench/long_rows_bound.py --reps 100 --out $OUT/bound 2>&1 | tail -3
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_loader.py > $OUT/loader-tests.txt 2>&1
echo "loader tests rc $?"; tail -2 $OUT/loader-tests.txt
