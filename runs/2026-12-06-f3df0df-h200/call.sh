#!/usr/bin/env bash
# at f3df0df, on an H200 only (exits 3 at once on another GPU): the split pass of 3b28766 (v0,
# the one kept) and of ed24b79 (v1) by bench/pass_boundary.py at the four "pass s8" points
# beside a device-to-device copy of the operands' bytes; the GEMM beside cuBLAS fp32 and its
# peers (bench/peer_quality.py); then the GEMM's GPU test files.
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=f3df0df TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu $OUT/v
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
variants=runs/2026-12-06-ed24b79-split-pass-loads/variants
python3 -c "
import json; p=json.load(open('bench/sustained_clock_points.json'))
json.dump([x for x in p if x['label']=='pass s8'], open('/tmp/pts.json','w'))"
python3 - <<'PY' 2>&1 | tee -a $log
import torch
ev = lambda: torch.cuda.Event(enable_timing=True)
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
print("same-bytes copy (A and B's fp32 bytes, one D2D copy), median of 20, L2 flushed")
for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (3000, 5000, 2000), (2048, 2048, 8192)):
    src = torch.empty(m * k + k * n, dtype=torch.float32, device="cuda"); dst = torch.empty_like(src)
    ts = []
    for _ in range(21):
        flush.zero_(); a, b = ev(), ev(); a.record(); dst.copy_(src); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000)
    ts = sorted(ts[1:]); mb = src.numel() * 4 / 1e6
    print(f"{m}x{n}x{k}: {mb:.0f} MB read + written, copy {ts[len(ts)//2]:.1f} us ({2 * mb / ts[len(ts)//2]:.2f} TB/s)")
PY
rm -rf /tmp/v && mkdir -p /tmp/v && tar --exclude=./runs --exclude=./.git --exclude=./.whl -cf /tmp/v/tree.tar .
for name in v0-before v1-after; do
  dir=/tmp/v/$name; mkdir -p $dir && tar -xf /tmp/v/tree.tar -C $dir
  cp $variants/$name.cu.j2 $dir/kernels/gemm_bias_relu/bf16_split_pass.cu.j2
  (cd $dir && PYTHONPATH=/tmp/site:$dir timeout -s KILL 90 python3 bench/pass_boundary.py \
    --points /tmp/pts.json --reps 20 --out $OUT/v/$name) > $OUT/v/$name.txt 2>&1
  echo "$name rc=$?" | tee -a $log; tail -4 $OUT/v/$name.txt | tee -a $log
done
timeout -s KILL 200 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 160 --out $OUT/g 2> $OUT/g-progress.txt | tee -a $log | tail -8
left=$(( 585 - ($(date +%s) - start) ))
echo "pytest gets ${left}s" | tee -a $log
timeout $left python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_wgmma.py \
  tests/test_sanitize.py tests/test_gpu_split_race.py tests/test_gpu_stream_k.py tests/test_gpu_split_k.py \
  tests/test_gpu_frag_prefetch.py tests/test_gpu_async_copy.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?" | tee -a $log; tail -16 $OUT/pytest.txt
cd $OUT && tar czf r.tgz gpu v g && rm -rf gpu v g
