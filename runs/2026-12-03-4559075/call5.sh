#!/usr/bin/env bash
# Run 2026-12-03/4559075, call 5: the GPU tests of the child's changed refusal (a spread group larger than
# the resident CTAs is a launch_error) and of the evaluator; then run 2026-12-03/e522bb1's next/next.sh
# (Nsight Compute on run 2026-12-03/f4c713d's staged point at 256x262144). Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 260 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py \
  tests/test_gpu_eval.py 2>&1 | tail -6 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
p=$(python3 -c "import sys, json; sys.path.insert(0, 'tests'); from softmax_bulk_points import STAGED_PICKS; print(json.dumps(STAGED_PICKS['c8x512s8'].to_dict()))")
timeout -s KILL 100 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu \
  --label staged_c8 --params "$p" 2>&1 | tail -4 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
