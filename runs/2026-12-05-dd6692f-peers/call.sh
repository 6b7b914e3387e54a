#!/usr/bin/env bash
# nvidia-h200, at dd6692f: the GEMM beside cuBLAS fp32 and every composition peer (the compiled
# one fixed) at the four headline shapes; then the softmax sweep beside torch.compile and
# Triton with the replay's bests, as far as the device time left allows. Carry .whl.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
export TUNEFORGE_COMMIT=dd6692f
r=$OUT/r; mkdir -p $r
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $r/log.txt
timeout -s KILL 200 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 160 \
  --out $r/g 2> $r/g-progress.txt | tee -a $r/log.txt | tail -8
echo "gemm rc=${PIPESTATUS[0]}" | tee -a $r/log.txt
timeout -s KILL 290 python3 bench/peer_quality.py --family softmax --budget-s 240 \
  --out $r/s 2> $r/s-progress.txt | tee -a $r/log.txt | tail -16
echo "softmax rc=${PIPESTATUS[0]}" | tee -a $r/log.txt
