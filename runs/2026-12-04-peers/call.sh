#!/usr/bin/env bash
# Issue 38, one call on nvidia-h200: tuneforge's kernels beside the vendor and the peers a
# PyTorch user reaches for (torch.compile, Triton; the GEMM's cuBLAS compositions and Triton
# bf16x3), flushed and sustained, at the softmax sweep and the four GEMM shapes; beside them
# tuneforge's softmax kernel in the Triton kernel's arrangements (triton-arrangements.json).
# Argument: the tree's commit. Carry .whl (docs: ../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=${1:-unknown} TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
d=runs/2026-12-04-peers; mkdir -p /tmp/r; log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $log
timeout -s KILL 540 python3 bench/peer_quality.py --out /tmp/r/q --budget-s 480 \
  --points $d/triton-arrangements.json 2>/tmp/r/progress.txt | tee -a $log | tail -80
tail -4 /tmp/r/progress.txt | tee -a $log
# Inductor's generated kernels (their configs): what torch.compile ran at each shape
(cd /tmp/inductor 2>/dev/null && find . \( -name "*.py" -o -name "*.best_config" \) -size -300k \
  | tar czf /tmp/r/inductor-code.tgz -T -)
tar czf $OUT/r.tgz -C /tmp r
