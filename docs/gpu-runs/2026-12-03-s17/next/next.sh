#!/usr/bin/env bash
# For the next session (not run: session 17 had no device time left): Nsight Compute on
# session 16's staged point (a cluster of 8 of 512 threads, 8 float4 in registers and 8 staged
# by cp.async, two an SM, 120 SMs) at 256x262144, beside
# call 5's best: what the cp.async half costs an SM. Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
mkdir -p /tmp/r; log=$OUT/log.txt
p=$(python3 -c "import sys, json; sys.path.insert(0, 'tests'); from softmax_bulk_points import STAGED_PICKS; print(json.dumps(STAGED_PICKS['c8x512s8'].to_dict()))")
timeout -s KILL 100 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu \
  --label staged_c8 --params "$p" 2>&1 | tail -12 | tee $log
tar czf $OUT/r.tgz -C /tmp r
