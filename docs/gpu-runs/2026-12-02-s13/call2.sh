#!/usr/bin/env bash
# Session 13, call 2 (<= 580 s of timeouts): the bf16 split pass (apply_split_pass) on the H200.
# 1. the GPU contract test of every split-pass variant (three distributions at 4096³, the
# awkward shapes, 8192³ for the first); 2. bench/precision_speed.py: the split-pass kernels
# beside the tf32x3 campaign best, the per-tile bf16x3 lockstep kernel, cuBLAS fp32 and the
# three-cuBLAS-bf16 composition, flushed and sustained >= 200 ms, at 4096³ and 8192³;
# 3. compute-sanitizer memcheck and racecheck on the first split-pass point.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=/tmp/r/gpu
log=$OUT/log.txt; mkdir -p /tmp/r/gpu
timeout -s KILL 170 python3 -m pytest -q -m gpu -p no:cacheprovider -k split_pass \
  tests/test_gpu_wgmma.py::test_bf16_splits_pass_the_fp32_contract 2>&1 | tail -4 | tee -a $log
W='"tf32x3": true, "wgmma": 128, "block_x": 128, "block_y": 2, "mma_window": 4'
P="$W, \"producers\": 1, \"bf16_split\": 3, \"split_pass\": true"
timeout -s KILL 300 python3 bench/precision_speed.py --min-ms 200 --out /tmp/r/speed \
  --shapes 4096x4096x4096,8192x8192x8192 \
  --label "tf32x3 ws2 (campaign best)" --params "{$W, \"stages\": 1, \"producers\": 2}" \
  --label "bf16x3 lockstep (per tile)" --params "{$W, \"stages\": 1, \"bf16_split\": 3}" \
  --label "bf16x3 pass st2" --params "{$P, \"stages\": 2}" \
  --label "bf16x3 pass st1" --params "{$P, \"stages\": 1}" \
  --label "bf16x3 pass st2 swz4" --params "{$P, \"stages\": 2, \"swizzle\": 4}" \
  --label "bf16x3 pass st2 w2" --params "{$P, \"stages\": 2, \"mma_window\": 2}" \
  --label "bf16x6 pass st1" --params "{$W, \"producers\": 1, \"bf16_split\": 6, \"split_pass\": true, \"stages\": 1}" \
  2>/tmp/r/speed-err.txt | tee -a $log
timeout -s KILL 100 python3 bench/sanitize_bests.py --kernel gemm_bias_relu --out /tmp/r/san \
  --shape 1024x1024x1024 --params "{$P, \"stages\": 2}" 2>&1 | tail -3 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
