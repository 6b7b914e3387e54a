#!/bin/bash
# at f8dfd27: the child's sustained rate two ways (a loop of launches, a CUDA graph of them)
# and its flushed figure without the output poison (bench/child_timing_check.py, three
# library entries of the 553da7c database); the GPU tests of the sustained path; then the
# library in one timer beside the peers at five short shapes (the child's column).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TUNEFORGE_COMMIT=f8dfd27 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
P='"vec":4,"passes":1,"load_hint":0,"store_hint":false,"max_first":true,"ptx_stores":true,"aligned_rows":true,"one_pass_grid":true'
{
timeout 120 python3 bench/child_timing_check.py --kernel softmax --shape 65536x128 \
  --params "{\"block_threads\":256,\"row_threads\":8,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 120 python3 bench/child_timing_check.py --kernel softmax --shape 32768x512 \
  --params "{\"block_threads\":64,\"row_threads\":32,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 120 python3 bench/child_timing_check.py --kernel softmax --shape 16x262144 \
  --params '{"block_threads":512,"row_threads":512,"cluster":8,"vec":4,"passes":1,"chunks":8,"unroll":2,"load_hint":3,"store_hint":true,"push":true,"aligned_rows":true}'
} > $OUT/timing.txt 2>&1
grep -v "^\s*$" $OUT/timing.txt | tail -24
mkdir -p $OUT/gpu; TUNEFORGE_GPU_OUT=$OUT/gpu timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gpu_softmax.py tests/test_gpu_cheat.py tests/test_gpu_loader.py \
  -k "sustained or peers_harness" > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -4 $OUT/pytest.txt
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
rm -rf /tmp/smlib
python3 -m cli.main library export --kernel softmax --db /tmp/sm.db --out /tmp/smlib 2>&1 | tail -1
timeout -s KILL 250 python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --bundle /tmp/smlib --budget-s 230 --out $OUT/q \
  --shapes 65536x128,32768x512,16384x1024,8192x4096,16x262144 2>$OUT/progress.txt > $OUT/log.txt
echo "rc $?"; tail -10 $OUT/log.txt
cd $OUT && tar czf gpu.tgz gpu q && rm -rf gpu q
