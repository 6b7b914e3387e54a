#!/usr/bin/env bash
# at e77de8c: the GEMM beside cuBLAS fp32 and every composition peer (operands split ahead or in
# each call, products summed by adds or in cuBLAS's epilogue, torch.compile) at the four
# headline shapes, flushed and sustained; then the loader bench with the same-contract peer.
# Carry .whl (docs: ../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
export TUNEFORGE_COMMIT=e77de8c
r=$OUT/r; mkdir -p $r
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $r/log.txt
timeout -s KILL 300 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 240 \
  --out $r/q 2> $r/progress.txt | tee -a $r/log.txt | tail -14
echo "peer_quality rc=${PIPESTATUS[0]}" | tee -a $r/log.txt
timeout -s KILL 230 python3 bench/loader_bench.py --budget-s 150 --out $r --work /tmp/lb \
  > $r/loader_bench.txt 2>&1
echo "loader rc=$?" | tee -a $r/log.txt; tail -7 $r/loader_bench.txt | tee -a $r/log.txt
