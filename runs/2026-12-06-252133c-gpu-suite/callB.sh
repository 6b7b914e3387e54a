#!/bin/bash
# the GPU suite at 252133c, part B: the evaluation pipeline, the cheat checks, the user family, softmax,
# the loader under torch.compile, the campaign faults
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_eval.py \
  tests/test_gpu_cheat.py tests/test_gpu_user_family.py tests/test_gpu_softmax.py tests/test_gpu_loader.py \
  tests/test_gpu_campaign_faults.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -20 $OUT/pytest.txt
cd $OUT && tar czf gpu.tgz gpu && rm -rf gpu
