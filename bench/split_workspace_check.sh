#!/usr/bin/env bash
# The GEMM's split-workspace kernels on one H200, in two calls of at most 9.5 minutes each:
#
#   bash bench/split_workspace_check.sh COMMIT contract   # on the GPU machine, .whl carried
#   bash bench/split_workspace_check.sh COMMIT speed
#
# contract (about 7 minutes, 9.5 at most by the timeouts):
#   1. tests/test_gpu_wgmma.py -k split_pass: every split-workspace variant (the pass's, the
#      on-demand split's, one tile a CTA and stream-K) correct at 4096³, at 8192³ for the
#      headline points, and at the awkward shapes; a hang bounded at 45 s;
#   2. tests/test_gpu_split_race.py: the kernels whose CTAs meet through global memory give
#      the same bits at 200 launches a shape, the workspace poisoned before each (a race);
#   3. bench/long_rows_bound.py (its load-only read half) and tests/test_gpu_loader.py (the
#      vendor timed as addmm + relu_), both owed to earlier changes.
# speed (about 7 minutes, 8.7 at most): bench/family_quality.py at the four headline shapes,
#   flushed and sustained (≥ 200 ms) beside cuBLAS fp32: the pass's point at swizzle 8, the
#   same scheduled stream-K, split on demand (swizzle 8 and 4; two producer warpgroups), and
#   split on demand and stream-K together.
#
# Under $OUT: log.txt (the short tables), pytest-*.txt, q/ (family_quality's JSON), bound/,
# gpu/ (the tests' saved records).
set -u
: "${OUT:?set OUT to the folder the results go to}"
part=${2:?say contract or speed}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=${1:-unknown} TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p "$OUT/gpu"
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log"

if [ "$part" = contract ]; then
  timeout -s KILL 330 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 \
    tests/test_gpu_wgmma.py -k split_pass > "$OUT/pytest-split-pass.txt" 2>&1
  echo "split-workspace contract: rc $?" | tee -a "$log"
  tail -4 "$OUT/pytest-split-pass.txt" | tee -a "$log"

  timeout -s KILL 80 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_gpu_split_race.py > "$OUT/pytest-race.txt" 2>&1
  echo "200 launches a shape, the same bits: rc $?" | tee -a "$log"
  tail -3 "$OUT/pytest-race.txt" | tee -a "$log"

  timeout -s KILL 60 python3 bench/long_rows_bound.py --out "$OUT/bound" > "$OUT/bound.txt" 2>&1
  echo "long rows bound: rc $?" | tee -a "$log"
  tail -8 "$OUT/bound.txt" | tee -a "$log"

  timeout -s KILL 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_loader.py \
    > "$OUT/pytest-loader.txt" 2>&1
  echo "loader: rc $?" | tee -a "$log"
  tail -3 "$OUT/pytest-loader.txt" | tee -a "$log"
elif [ "$part" = speed ]; then
  P='"block_x":128,"block_y":2,"tf32x3":true,"wgmma":128,"mma_window":4,"producers":1,"bf16_split":3,"split_pass":true,"stages":2'
  D='"split_on_demand":true'
  timeout -s KILL 520 python3 bench/family_quality.py --kernel gemm_bias_relu --min-ms 200 \
    --params "{$P,\"swizzle\":8}" --label pass-s8 \
    --params "{$P,\"swizzle\":8,\"stream_k\":1}" --label pass-s8-sk \
    --params "{$P,\"swizzle\":8,$D}" --label demand-s8 \
    --params "{$P,\"swizzle\":4,$D}" --label demand-s4 \
    --params "{${P/\"producers\":1/\"producers\":2},\"swizzle\":8,$D}" --label demand-p2-s8 \
    --params "{$P,\"swizzle\":8,$D,\"stream_k\":1}" --label demand-s8-sk \
    --shapes 4096x4096x4096,8192x8192x8192,2048x2048x8192,3000x5000x2000 \
    --out "$OUT/q" > "$OUT/quality.txt" 2>&1
  echo "quality: rc $?" | tee -a "$log"
  tail -28 "$OUT/quality.txt" | tee -a "$log"
else
  echo "unknown part $part: say contract or speed" | tee -a "$log"
  exit 2
fi
