#!/usr/bin/env bash
# Session 17, call 5: Nsight Compute on the same CTA (512 threads, 8 float4, two an SM) where it
# moves the same 256 MB at 85 % (256x262144, clusters of 16) and at 91 % (512x131072, clusters
# of 8): SM activity, occupancy, memory throughput and stalls, for the next session's look at
# clusters of 16. Argument: the tree's commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
mkdir -p /tmp/r; log=$OUT/log.txt
p='{"block_threads": 512, "row_threads": 512, "vec": 4, "passes": 1, "chunks": 8, "unroll": 1, "load_hint": 1, "store_hint": true, "push": true'
timeout -s KILL 100 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu16 \
  --label c16 --params "$p, \"cluster\": 16}" 2>&1 | tail -22 | tee $log
timeout -s KILL 100 python3 bench/ncu_sections.py --kernel softmax --shape 512x131072 --out /tmp/r/ncu8 \
  --label c8 --params "$p, \"cluster\": 8}" 2>&1 | tail -22 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
