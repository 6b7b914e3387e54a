#!/usr/bin/env bash
# The GEMM's on-demand split on one H200, in one call (about 8 minutes, at most 9.5 by the
# timeouts), then the two GPU checks still owed to earlier changes:
#   1. tests/test_gpu_wgmma.py -k split_pass: every split-pass variant (the pass's and the
#      on-demand ones) correct at 4096³, 8192³ for the headline points and the awkward shapes,
#      a hang bounded at 45 s;
#   2. bench/family_quality.py: the pass's point at swizzle 8 beside the same point split on
#      demand (swizzle 8 and 4; and at swizzle 8 with two producer warpgroups, seven warps
#      splitting a CTA) at the four headline shapes, flushed and sustained (≥ 200 ms), beside
#      cuBLAS fp32;
#   3. bench/long_rows_bound.py (its load-only read half) and tests/test_gpu_loader.py (the
#      vendor timed as addmm + relu_).
#
#   bash bench/on_demand_check.sh COMMIT      # on the GPU machine, .whl carried; needs $OUT
#
# Under $OUT: log.txt (the short tables), pytest-*.txt, q/ (family_quality's JSON), bound/,
# gpu/ (the tests' saved records).
set -u
: "${OUT:?set OUT to the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=${1:-unknown} TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p "$OUT/gpu"
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log"

timeout -s KILL 200 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 \
  tests/test_gpu_wgmma.py -k split_pass > "$OUT/pytest-split-pass.txt" 2>&1
echo "split-pass contract: rc $?" | tee -a "$log"
tail -4 "$OUT/pytest-split-pass.txt" | tee -a "$log"

P='"block_x":128,"block_y":2,"tf32x3":true,"wgmma":128,"mma_window":4,"producers":1,"bf16_split":3,"split_pass":true,"stages":2'
timeout -s KILL 230 python3 bench/family_quality.py --kernel gemm_bias_relu --min-ms 200 \
  --params "{$P,\"swizzle\":8}" --label pass-s8 \
  --params "{$P,\"swizzle\":8,\"split_on_demand\":true}" --label demand-s8 \
  --params "{$P,\"swizzle\":4,\"split_on_demand\":true}" --label demand-s4 \
  --params "{${P/\"producers\":1/\"producers\":2},\"swizzle\":8,\"split_on_demand\":true}" \
  --label demand-p2-s8 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x8192,3000x5000x2000 \
  --out "$OUT/q" > "$OUT/quality.txt" 2>&1
echo "quality: rc $?" | tee -a "$log"
tail -16 "$OUT/quality.txt" | tee -a "$log"

timeout -s KILL 60 python3 bench/long_rows_bound.py --out "$OUT/bound" > "$OUT/bound.txt" 2>&1
echo "long rows bound: rc $?" | tee -a "$log"
tail -8 "$OUT/bound.txt" | tee -a "$log"

timeout -s KILL 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_loader.py \
  > "$OUT/pytest-loader.txt" 2>&1
echo "loader: rc $?" | tee -a "$log"
tail -3 "$OUT/pytest-loader.txt" | tee -a "$log"
