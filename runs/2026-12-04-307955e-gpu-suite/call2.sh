#!/bin/bash
# the GPU suite, part 2: the user family, softmax, the loader, the campaign faults
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=10 tests/test_gpu_user_family.py \
  tests/test_gpu_softmax.py tests/test_gpu_loader.py tests/test_gpu_campaign_faults.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -16 $OUT/pytest.txt
cd $OUT && tar czf gpu.tgz gpu && rm -rf gpu
