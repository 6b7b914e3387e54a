#!/bin/bash
# A's bf16x3 parts in registers (a_registers): the split-pass contract test (every split-pass
# variant, the eight new ones among them, at 4096^3 and the awkward shapes), then the pass's
# best points and their a_registers twins at the four shapes, flushed and sustained, beside
# cuBLAS fp32.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
P='"block_x":128,"block_y":2,"tf32x3":true,"wgmma":128,"mma_window":4,"producers":1,"bf16_split":3,"split_pass":true'
timeout 300 python3 -m pytest -m gpu -q -x tests/test_gpu_wgmma.py -k "split_pass" 2>&1 | tail -15 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
timeout 270 python3 bench/family_quality.py --kernel gemm_bias_relu --min-ms 200 \
  --params "{$P,\"stages\":2,\"swizzle\":2}" --label pass-s2 \
  --params "{$P,\"stages\":2,\"swizzle\":2,\"a_registers\":true}" --label areg-s2 \
  --params "{$P,\"stages\":2,\"swizzle\":8}" --label pass-s8 \
  --params "{$P,\"stages\":2,\"swizzle\":8,\"a_registers\":true}" --label areg-s8 \
  --params "{$P,\"stages\":1,\"swizzle\":2,\"a_registers\":true}" --label areg-st1-s2 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x8192,3000x5000x2000 --out $OUT/q > $OUT/quality.txt 2>&1
tail -32 $OUT/quality.txt
