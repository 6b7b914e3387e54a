#!/usr/bin/env bash
# Run as `call.sh COMMIT` (carry .whl), on any Hopper GPU: the loader's GPU tests
# (tests/test_gpu_loader.py), among them the near-tie tests: on a GPU whose name is not the
# bundle's, an entry's point and its near-tie timed at the first call, the faster kept; the
# loader's INFO lines (each point's time a call) kept in pytest.txt. K: pytest's -k.
commit=${1:?usage: call.sh COMMIT}
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; echo "commit $commit"; } | tee $log
timeout ${TESTS_S:-420} python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 \
  -o log_cli=true --log-cli-level=INFO ${K:+-k "$K"} tests/test_gpu_loader.py > $OUT/pytest.txt 2>&1
echo "tests rc $? at $(( $(date +%s) - start ))s" | tee -a $log
grep -a "near-tie(s)" $OUT/pytest.txt | cut -c1-400 | tee -a $log
tail -16 $OUT/pytest.txt
