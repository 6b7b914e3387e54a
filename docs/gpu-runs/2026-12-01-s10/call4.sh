#!/usr/bin/env bash
# Session 10, call 4: compute-sanitizer (memcheck, racecheck) on the softmax campaigns' best
# kernels (clusters and DSMEM included), and the GEMM's sanitizer tests through the generic launcher.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
timeout -s KILL 240 python3 bench/sanitize_bests.py --kernel softmax --out $OUT 2>$OUT/err.txt | tee $OUT/log.txt
timeout -s KILL 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_sanitize.py::test_baseline_and_tuned_kernels_pass_memcheck_and_racecheck[tf32x3]" \
  tests/test_sanitize.py::test_planted_race_is_flagged_by_racecheck \
  tests/test_sanitize.py::test_planted_out_of_bounds_store_is_flagged_by_memcheck 2>&1 | tail -4 | tee -a $OUT/log.txt
tail -c 3000 $OUT/err.txt > $OUT/err-tail.txt; rm -f $OUT/err.txt
