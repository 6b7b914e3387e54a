#!/usr/bin/env bash
# Session 13, call 3 (<= 420 s of timeouts): the split pass in clusters of two CTAs sharing A
# by multicast (apply_pass_cluster) on the H200. 1. the GPU contract test of every split-pass
# variant, the cluster ones among them; 2. bench/precision_speed.py at 4096³ and 8192³ beside
# cuBLAS fp32 and the composition, flushed and sustained >= 200 ms; 3. compute-sanitizer.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=/tmp/r/gpu
log=$OUT/log.txt; mkdir -p /tmp/r/gpu
timeout -s KILL 120 python3 -m pytest -q -m gpu -p no:cacheprovider -k split_pass \
  tests/test_gpu_wgmma.py::test_bf16_splits_pass_the_fp32_contract 2>&1 | tail -4 | tee -a $log
W='"tf32x3": true, "wgmma": 128, "block_x": 128, "block_y": 2, "mma_window": 4'
P="$W, \"producers\": 1, \"bf16_split\": 3, \"split_pass\": true, \"stages\": 2"
timeout -s KILL 200 python3 bench/precision_speed.py --min-ms 200 --out /tmp/r/speed \
  --shapes 4096x4096x4096,8192x8192x8192 \
  --label "bf16x3 pass swz4 (call 2)" --params "{$P, \"swizzle\": 4}" \
  --label "bf16x3 pass cl2" --params "{$P, \"pass_cluster\": 2}" \
  --label "bf16x3 pass cl2 swz4" --params "{$P, \"pass_cluster\": 2, \"swizzle\": 4}" \
  --label "bf16x3 pass cl2 swz8" --params "{$P, \"pass_cluster\": 2, \"swizzle\": 8}" \
  --label "bf16x3 pass cl2 swz4 w2" --params "{$P, \"pass_cluster\": 2, \"swizzle\": 4, \"mma_window\": 2}" \
  2>/tmp/r/speed-err.txt | tee -a $log
timeout -s KILL 80 python3 bench/sanitize_bests.py --kernel gemm_bias_relu --out /tmp/r/san \
  --shape 1024x1024x1024 --params "{$P, \"pass_cluster\": 2, \"swizzle\": 4}" 2>&1 | tail -3 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
