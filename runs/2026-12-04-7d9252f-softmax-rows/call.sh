#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 7d9252f (under 3 minutes by the timeouts): our held rows with
# max_first + ptx_stores, then with aligned_rows (no head or tail), with one_pass_grid too (no
# grid-stride loop), and with both new moves without ptx_stores, at 65536x128, 32768x512,
# 16384x1024 (64 and 128 threads a row) and the 8192x4096 control, beside torch,
# torch.compile, Triton's row kernel and the same-bytes copy (bench/peer_quality.py: flushed
# median and sustained rate).
#
#   bash runs/2026-12-04-7d9252f-softmax-rows/call.sh      # from the repository root; needs $OUT
#
# Under $OUT: script.txt (everything printed) and rows.tgz (q/peer_quality.json, q/peers.json,
# the points, q-progress.txt).
set -u
: "${OUT:?set OUT to the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=7d9252f TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r
mkdir -p "$r/q"
{
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
python3 bench/softmax_gap.py rows --out "$r/points.json" || exit 1
# ours (20 points) beside the peers, flushed and sustained (~130 s)
timeout -s KILL 150 python3 bench/peer_quality.py --family softmax \
  --shapes 65536x128,32768x512,16384x1024,8192x4096 --no-replay --points "$r/points.json" \
  --out "$r/q" --budget-s 120 2>"$r/q-progress.txt" | tail -40
echo "peer_quality exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
tail -3 "$r/q-progress.txt"
} > "$OUT/script.txt" 2>&1
tail -50 "$OUT/script.txt"
tar -C "$OUT" -czf "$OUT/rows.tgz" r && rm -rf "$r"
