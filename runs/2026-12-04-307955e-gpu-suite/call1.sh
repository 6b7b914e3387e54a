#!/bin/bash
# the GPU suite, part 1: the wgmma kernels (every variant, bf16 splits and split pass) and the
# sanitizer gate
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=10 tests/test_gpu_wgmma.py \
  tests/test_sanitize.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -16 $OUT/pytest.txt
cd $OUT && tar czf gpu.tgz gpu && rm -rf gpu
