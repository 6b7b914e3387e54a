#!/usr/bin/env bash
# 2026-12-04, call 2 on nvidia-h200: the exported library's loader. Its GPU tests (eager and
# under torch.compile(fullgraph=True), softmax, the GEMM and a user family), the loader bench
# (50 random shapes a family, half untuned: correctness, x the library's figure, dispatch
# overhead, fallback x vendor), and the C++ demo built with nvcc against a bundle's header.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -s -p no:cacheprovider tests/test_gpu_loader.py \
  > $OUT/gpu_loader_tests.txt 2>&1
tail -15 $OUT/gpu_loader_tests.txt | tee -a $log
timeout -s KILL 230 python3 bench/loader_bench.py --out $OUT --work /tmp/lb > $OUT/loader_bench.txt 2>&1
tail -30 $OUT/loader_bench.txt | tee -a $log
nvcc -std=c++17 -O2 -I /tmp/lb/softmax examples/library/softmax_demo.cu -o /tmp/demo -lcuda \
  > $OUT/softmax_demo.txt 2>&1 && timeout 60 /tmp/demo /tmp/lb/softmax >> $OUT/softmax_demo.txt 2>&1
tail -12 $OUT/softmax_demo.txt | tee -a $log
