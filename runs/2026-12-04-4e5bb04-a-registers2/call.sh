#!/bin/bash
# a_registers with MMAs in groups of two k16 steps beside the pass's best point at the four
# headline shapes; then seven of the GPU test files.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
P='"block_x":128,"block_y":2,"tf32x3":true,"wgmma":128,"mma_window":4,"producers":1,"bf16_split":3,"split_pass":true,"stages":2'
timeout 200 python3 bench/family_quality.py --kernel gemm_bias_relu --min-ms 200 \
  --params "{$P,\"swizzle\":8}" --label pass-s8 \
  --params "{$P,\"swizzle\":8,\"a_registers\":true}" --label areg-s8 \
  --params "{$P,\"swizzle\":2,\"a_registers\":true}" --label areg-s2 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x8192,3000x5000x2000 --out $OUT/q > $OUT/quality.txt 2>&1
tail -15 $OUT/quality.txt
timeout 380 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_async_copy.py \
  tests/test_gpu_stream_k.py tests/test_gpu_frag_prefetch.py tests/test_gpu_cheat.py \
  tests/test_gpu_user_family.py tests/test_gpu_eval.py tests/test_gpu_split_k.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -18 $OUT/pytest.txt
