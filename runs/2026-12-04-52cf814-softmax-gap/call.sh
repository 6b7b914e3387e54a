#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 52cf814 (about 3.5 minutes, at most 4 by the timeouts): our held
# rows at 65536x128, 32768x512, 16384x1024, 8192x4096 as they were, with max_first, with
# ptx_stores and with both, beside torch, torch.compile, Triton's row kernel and the same-bytes
# copy (bench/peer_quality.py: flushed median and sustained rate); then Nsight Compute at
# 16384x1024 on ours (as they were, with both) and Triton's softmax_row_kernel (4 and 2 warps).
#
#   bash runs/2026-12-04-52cf814-softmax-gap/call.sh      # from the repository root; needs $OUT
#
# Under $OUT: script.txt (everything printed) and gap.tgz (q/peer_quality.json, q/peers.json,
# the points, q-progress.txt, ncu/summary.json and each kernel's ncu CSV).
set -u
: "${OUT:?set OUT to the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=52cf814 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r
mkdir -p "$r/q" "$r/ncu"
{
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
python3 bench/softmax_gap.py points --out "$r/points.json" || exit 1
# 1. ours (24 points) beside the peers, flushed and sustained (~120 s)
timeout -s KILL 140 python3 bench/peer_quality.py --family softmax \
  --shapes 65536x128,32768x512,16384x1024,8192x4096 --no-replay --points "$r/points.json" \
  --out "$r/q" --budget-s 130 2>"$r/q-progress.txt" | tail -40
echo "peer_quality exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
tail -3 "$r/q-progress.txt"
# 2. Nsight Compute at 16384x1024: 4 of ours, Triton's at 4 and 2 warps (~60 s)
timeout -s KILL 70 python3 bench/softmax_gap.py ncu --shape 16384x1024 --out "$r/ncu"
echo "ncu exit $? at $(( $(date +%s) - t0 )) s"
} > "$OUT/script.txt" 2>&1
tail -70 "$OUT/script.txt"
tar -C "$OUT" -czf "$OUT/gap.tgz" r && rm -rf "$r"
