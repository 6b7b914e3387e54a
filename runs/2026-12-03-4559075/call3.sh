#!/usr/bin/env bash
# Run 2026-12-03/4559075, call 3: the pipelined group with warp 0 alone polling the tagged slots (call 2's
# every-warp polling ran slower than call 1's release). 1. pipeline3.json beside the best and
# the plain spread group. 2. Nsight Compute on the pipelined group of 32 and the plain spread
# group of 16 at 256x262144: where a spread CTA's time goes. 3. The softmax GPU tests.
# Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
d=runs/2026-12-03-4559075; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 150 python3 bench/family_quality.py --kernel softmax --points $d/pipeline3.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -9 | tee -a $log
pick() { python3 -c "import json, sys; sys.path.insert(0, 'tests'); from softmax_bulk_points import SPREAD_PICKS; print(json.dumps(SPREAD_PICKS['$1'].to_dict()))"; }
for k in g32x512p4 g16x512; do
  timeout -s KILL 100 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu-$k \
    --label $k --params "$(pick $k)" 2>&1 | tail -4 | tee -a $log
done
timeout -s KILL 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py \
  2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null
tail -3 /tmp/r/err.txt >> $log
tar czf $OUT/r.tgz -C /tmp r
