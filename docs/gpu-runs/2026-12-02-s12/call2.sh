#!/usr/bin/env bash
# Session 12, call 2 (<= 330 s of timeouts): the vendor's L2 flush against the evaluation child's
# (torch.softmax and cuBLAS timed with both, worker/vendor.py --flush); Nsight Compute of the
# long-row softmax kernels (register-held clusters, bulk copies, two passes) beside the
# 8192x8192 best (92.6 % of copy) and torch's kernel, to see what holds them under 80 %.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; mkdir -p $OUT/r
echo "== vendor flush: legacy (mul_+add_ over 256 MiB) vs child (one pass over 4 x L2)" | tee -a $log
for fs in "softmax 65536x128" "softmax 32768x512" "softmax 16384x1024" "softmax 8192x8192" "softmax 16x262144" "softmax 2048x65536" "gemm_bias_relu 4096x4096x4096"; do
  set -- $fs
  for mode in legacy child legacy child; do
    us=$(timeout -s KILL 40 python3 -m worker.vendor --family $1 $2 --flush $mode | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(r.get('avg_us', r.get('error')))")
    echo "$1 $2 $mode $us" | tee -a $log
  done
done
S10_8192='{"block_threads": 256, "chunks": 4, "cluster": 1, "load_hint": 3, "passes": 1, "row_threads": 256, "store_hint": true, "unroll": 2, "vec": 4}'
B1024='{"block_threads": 512, "chunks": 8, "cluster": 8, "load_hint": 1, "passes": 1, "row_threads": 512, "store_hint": true, "unroll": 1, "vec": 4}'
B2048='{"block_threads": 512, "chunks": 4, "cluster": 4, "load_hint": 1, "passes": 1, "row_threads": 512, "store_hint": true, "unroll": 1, "vec": 4}'
B16='{"block_threads": 512, "chunks": 1, "cluster": 8, "load_hint": 3, "passes": 2, "row_threads": 512, "store_hint": true, "unroll": 4, "vec": 4}'
C4x512='{"block_threads": 512, "bulk": 4, "cluster": 4, "row_threads": 512, "unroll": 2, "vec": 4}'
C8x512='{"block_threads": 512, "bulk": 4, "cluster": 8, "row_threads": 512, "unroll": 2, "vec": 4}'
ncu() { local shape=$1; shift; timeout -s KILL 80 python3 bench/ncu_sections.py --kernel softmax --shape $shape --out /tmp/ncu-$shape "$@" 2>&1 | tail -12 | tee -a $log; cp /tmp/ncu-$shape/summary.json $OUT/r/ncu-$shape.json; }
echo "== ncu 8192x8192 (reference: 92.6 % of copy)" | tee -a $log
ncu 8192x8192 --label s10best --params "$S10_8192" --vendor regex:softmax
echo "== ncu 1024x131072" | tee -a $log
ncu 1024x131072 --label reg-c8 --params "$B1024" --label bulk-c8 --params "$C8x512" --vendor regex:softmax
echo "== ncu 2048x65536" | tee -a $log
ncu 2048x65536 --label reg-c4 --params "$B2048" --label bulk-c4 --params "$C4x512"
echo "== ncu 16x262144" | tee -a $log
ncu 16x262144 --label best-c8 --params "$B16"
