#!/usr/bin/env bash
# nvidia-h200, at 178a332: the GEMM beside cuBLAS fp32 and every composition peer, the
# compiled one keeping its casts' rounding
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor2 TUNEFORGE_COMMIT=178a332; r=$OUT/r; mkdir -p $r; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $r/log.txt; timeout -s KILL 200 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 160 --out $r/g 2> $r/g-progress.txt | tee -a $r/log.txt | tail -8
