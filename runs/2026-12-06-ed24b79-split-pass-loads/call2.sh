#!/usr/bin/env bash
# at ed24b79, the same H100 as call.sh: the split pass's four templates (variants/: 3b28766's,
# ed24b79's, and each one's A half with the other's B half) by bench/pass_boundary.py at the
# four "pass s8" points, beside a device-to-device copy of the operands' bytes (torch, L2
# flushed); then the other half of the GPU suite (callB of the 252133c record).
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=ed24b79 TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu $OUT/v
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
here=$(dirname "$0")
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
for f in $here/variants/*.cu.j2; do
  name=$(basename $f .cu.j2); dir=/tmp/v/$name; mkdir -p $dir && tar -xf /tmp/v/tree.tar -C $dir
  cp $f $dir/kernels/gemm_bias_relu/bf16_split_pass.cu.j2
  (cd $dir && PYTHONPATH=/tmp/site:$dir timeout -s KILL 90 python3 bench/pass_boundary.py \
    --points /tmp/pts.json --reps 20 --out $OUT/v/$name) > $OUT/v/$name.txt 2>&1
  echo "$name rc=$?" | tee -a $log; tail -4 $OUT/v/$name.txt | tee -a $log
done
left=$(( 585 - ($(date +%s) - start) ))
echo "pytest gets ${left}s" | tee -a $log
timeout $left python3 -m pytest -m gpu -q -p no:cacheprovider --durations=12 tests/test_gpu_eval.py \
  tests/test_gpu_cheat.py tests/test_gpu_user_family.py tests/test_gpu_softmax.py tests/test_gpu_loader.py \
  tests/test_gpu_campaign_faults.py > $OUT/pytest.txt 2>&1
echo "pytest rc $?" | tee -a $log; tail -16 $OUT/pytest.txt
cd $OUT && tar czf r.tgz gpu v && rm -rf gpu v
