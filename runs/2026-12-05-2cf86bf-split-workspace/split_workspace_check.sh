#!/usr/bin/env bash
# The GEMM's split-workspace kernels on one H200, in calls of at most 9.5 minutes each:
#
#   bash bench/split_workspace_check.sh COMMIT contract   # on the GPU machine, .whl carried
#   bash bench/split_workspace_check.sh COMMIT speed
#   bash bench/split_workspace_check.sh COMMIT owed
#
# contract (about 7 minutes, 9 at most by the timeouts):
#   1. tests/test_gpu_wgmma.py -k split_pass: every split-workspace variant (the pass's, the
#      on-demand split's, accumulating in the MMAs, 128 x 256 tiles, one tile a CTA and
#      stream-K) correct at 4096³, at 8192³ for the headline points, and at the awkward
#      shapes; a hang bounded at 45 s; and every bf16 module's SASS (cuobjdump) holds bf16
#      HGMMA and no local memory;
#   2. tests/test_gpu_split_race.py: the kernels whose CTAs meet through global memory, or
#      whose consumers release a stage with MMAs in flight (accumulating in the MMAs), give
#      the same bits at 200 launches a shape, the workspace poisoned before each (a race);
# owed (about 4 minutes, 5 at most): the SIMT stream-K kernels' contract (tests/
#   test_gpu_stream_k.py: the fix-up they share with the bf16 kernels was rewritten), then
#   bench/long_rows_bound.py (its load-only read half) and tests/test_gpu_loader.py (the vendor
#   timed as addmm + relu_), both owed to earlier changes.
# speed (about 8 minutes, 9.5 at most): bench/peer_quality.py with the points of
#   bench/split_workspace_points.json at the four headline shapes, flushed and sustained
#   (≥ 200 ms) beside cuBLAS fp32 and the peers (cuBLAS's bf16x3 composition, Triton's bf16x3
#   tl.dot) in the same run, most telling first (past the budget the last are skipped): the
#   pass's point at swizzle 8, split on demand, accumulating in the MMAs, its 128 x 256 tiles,
#   on demand accumulating, then each stream-K, then on demand at swizzle 4 and with two
#   producer warpgroups.
#
# Under $OUT: log.txt (the short tables), pytest-*.txt, q/ (peer_quality's and the peers'
# JSON), quality.txt and progress.txt, bound/, gpu/ (the tests' saved records).
set -u
: "${OUT:?set OUT to the folder the results go to}"
part=${2:?say contract, speed or owed}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=${1:-unknown} TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p "$OUT/gpu"
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log"

if [ "$part" = contract ]; then
  timeout -s KILL 400 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 \
    tests/test_gpu_wgmma.py -k "split_pass or bf16_sass" > "$OUT/pytest-split-pass.txt" 2>&1
  echo "split-workspace contract: rc $?" | tee -a "$log"
  tail -4 "$OUT/pytest-split-pass.txt" | tee -a "$log"

  timeout -s KILL 130 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_gpu_split_race.py > "$OUT/pytest-race.txt" 2>&1
  echo "200 launches a shape, the same bits: rc $?" | tee -a "$log"
  tail -3 "$OUT/pytest-race.txt" | tee -a "$log"

elif [ "$part" = speed ]; then
  export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
  timeout -s KILL 570 python3 bench/peer_quality.py --family gemm_bias_relu --no-replay \
    --points bench/split_workspace_points.json --min-ms 200 --budget-s 520 \
    --out "$OUT/q" > "$OUT/quality.txt" 2>"$OUT/progress.txt"
  echo "quality: rc $?" | tee -a "$log"
  tail -32 "$OUT/quality.txt" | tee -a "$log"
elif [ "$part" = owed ]; then
  timeout -s KILL 150 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_gpu_stream_k.py -k contract > "$OUT/pytest-stream-k.txt" 2>&1
  echo "SIMT stream-K contract (its fix-up rewritten): rc $?" | tee -a "$log"
  tail -3 "$OUT/pytest-stream-k.txt" | tee -a "$log"

  timeout -s KILL 60 python3 bench/long_rows_bound.py --out "$OUT/bound" > "$OUT/bound.txt" 2>&1
  echo "long rows bound: rc $?" | tee -a "$log"
  tail -8 "$OUT/bound.txt" | tee -a "$log"

  timeout -s KILL 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_loader.py \
    > "$OUT/pytest-loader.txt" 2>&1
  echo "loader: rc $?" | tee -a "$log"
  tail -3 "$OUT/pytest-loader.txt" | tee -a "$log"
else
  echo "unknown part $part: say contract, speed or owed" | tee -a "$log"
  exit 2
fi
