#!/usr/bin/env bash
# at ed24b79: the split pass that issues every load first (B by float4, no shared memory),
# beside the pass of 3b28766 (variants/v0-before.cu.j2) in the same run: bench/pass_boundary.py
# at the eight points; the GEMM beside cuBLAS fp32 and its peers (bench/peer_quality.py); the
# GEMM's GPU test files.
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=ed24b79 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
here=$(dirname "$0")
rm -rf /tmp/before && mkdir -p /tmp/before && tar --exclude=./runs --exclude=./.git --exclude=./.whl -cf - . | tar -xf - -C /tmp/before
cp "$here/variants/v0-before.cu.j2" /tmp/before/kernels/gemm_bias_relu/bf16_split_pass.cu.j2
for side in after before; do
  dir=$PWD; [ $side = before ] && dir=/tmp/before
  (cd $dir && PYTHONPATH=/tmp/site:$dir TUNEFORGE_HOME=/tmp/tfhome-$side timeout -s KILL 120 python3 bench/pass_boundary.py \
    --points bench/sustained_clock_points.json --reps 20 --out $OUT/boundary-$side) > $OUT/boundary-$side.txt 2>&1
  echo "boundary $side rc=$?" | tee -a $log; tail -9 $OUT/boundary-$side.txt | tee -a $log
done
timeout -s KILL 200 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 160 --out $OUT/g 2> $OUT/g-progress.txt | tee -a $log | tail -8
left=$(( 585 - ($(date +%s) - start) ))
echo "pytest gets ${left}s" | tee -a $log
timeout $left python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_wgmma.py \
  tests/test_sanitize.py tests/test_gpu_split_race.py tests/test_gpu_stream_k.py tests/test_gpu_split_k.py \
  tests/test_gpu_frag_prefetch.py tests/test_gpu_async_copy.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?" | tee -a $log; tail -16 $OUT/pytest.txt
cd $OUT && tar czf r.tgz gpu g boundary-after boundary-before && rm -rf gpu g boundary-after boundary-before
