#!/bin/bash
# at 7f620b8: the child waits for each timed launch. bench/child_timing_check.py at three library
# entries of the 553da7c database; the GPU tests of the timing path; the library in one timer
# at three short shapes (the child's column).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TUNEFORGE_COMMIT=7f620b8 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
P='"vec":4,"passes":1,"load_hint":0,"store_hint":false,"max_first":true,"ptx_stores":true,"aligned_rows":true,"one_pass_grid":true'
{
timeout 60 python3 bench/child_timing_check.py --kernel softmax --shape 65536x128 --min-ms 50 \
  --params "{\"block_threads\":256,\"row_threads\":8,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 60 python3 bench/child_timing_check.py --kernel softmax --shape 32768x512 --min-ms 50 \
  --params "{\"block_threads\":64,\"row_threads\":32,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 60 python3 bench/child_timing_check.py --kernel softmax --shape 16x262144 --min-ms 50 \
  --params '{"block_threads":512,"row_threads":512,"cluster":8,"vec":4,"passes":1,"chunks":8,"unroll":2,"load_hint":3,"store_hint":true,"push":true,"aligned_rows":true}'
} 2>&1 | grep -v "^\s*$" > $OUT/timing.txt
cat $OUT/timing.txt
timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 tests/test_gpu_eval.py \
  tests/test_gpu_cheat.py tests/test_gpu_campaign_faults.py tests/test_gpu_softmax.py \
  -k "not bulk and not awkward" > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/pytest.txt
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
rm -rf /tmp/smlib
python3 -m cli.main library export --kernel softmax --db /tmp/sm.db --out /tmp/smlib 2>&1 | tail -1
timeout -s KILL 100 python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --bundle /tmp/smlib --budget-s 90 --out $OUT/q \
  --shapes 65536x128,32768x512,16x262144 2>$OUT/progress.txt > $OUT/log.txt
echo "rc $?"; tail -7 $OUT/log.txt
cd $OUT && tar czf gpu.tgz gpu q && rm -rf gpu q
