#!/usr/bin/env bash
# Session 12, call 4 (<= 470 s of timeouts): the vendor harness with the child's poison of the
# outputs before each flush (worker/vendor.py, once.outputs) against without; our 65536x128
# kernels in both harnesses again; the sweep (sweep.json: every shape's campaign best, session
# 10's where call 3 did not run a campaign) beside torch.softmax and the copy in one run;
# compute-sanitizer on the fastest point of each shape of the merged replay dataset.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; mkdir -p /tmp/r
echo "== vendor: outputs poisoned before each flush, or not" | tee -a $log
for fs in "softmax 65536x128" "softmax 32768x512" "softmax 8192x8192" "gemm_bias_relu 4096x4096x4096"; do
  set -- $fs
  for mode in "" --no-poison "" --no-poison; do
    us=$(timeout -s KILL 40 python3 -m worker.vendor --family $1 $2 $mode | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(r.get('avg_us', r.get('error')), r.get('poisoned_outputs'))")
    echo "$1 $2 ${mode:-poisoned} $us" | tee -a $log
  done
done
B128='{"block_threads": 128, "chunks": 4, "cluster": 1, "load_hint": 0, "passes": 1, "row_threads": 8, "store_hint": false, "unroll": 1, "vec": 4}'
S10_128='{"block_threads": 32, "chunks": 4, "cluster": 1, "load_hint": 0, "passes": 1, "row_threads": 4, "store_hint": false, "unroll": 1, "vec": 4}'
echo "== 65536x128 in both harnesses" | tee -a $log
timeout -s KILL 60 python3 bench/harness_check.py --kernel softmax --shape 65536x128 --out /tmp/r/harness.json \
  --params "$B128" --params "$S10_128" 2>>/tmp/r/err.txt | tail -4 | tee -a $log
echo "== the sweep" | tee -a $log
timeout -s KILL 200 python3 bench/family_quality.py --kernel softmax --points docs/gpu-runs/2026-12-02-s12/sweep.json \
  --out /tmp/r/sweep --min-ms 200 2>>/tmp/r/err.txt | tail -16 | tee -a $log
echo "== compute-sanitizer on the replay dataset's bests" | tee -a $log
timeout -s KILL 130 python3 bench/sanitize_bests.py --kernel softmax --out /tmp/r/san 2>>/tmp/r/err.txt | tail -13 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
