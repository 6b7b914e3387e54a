#!/bin/bash
# the GPU suite at 252133c, part A: the GEMM's kernels (wgmma variants, bf16 splits, split pass,
# stream-K, the race launches, split-K, the register pipeline, async copies) and the sanitizer gate
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_wgmma.py \
  tests/test_sanitize.py tests/test_gpu_split_race.py tests/test_gpu_stream_k.py tests/test_gpu_split_k.py \
  tests/test_gpu_frag_prefetch.py tests/test_gpu_async_copy.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -20 $OUT/pytest.txt
cd $OUT && tar czf gpu.tgz gpu && rm -rf gpu
