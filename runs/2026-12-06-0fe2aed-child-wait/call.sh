#!/bin/bash
# at 0fe2aed: bench/child_timing_check.py at three library entries of the 553da7c database,
# its five ways (one waits for each timed launch, as the peers' harness does)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
P='"vec":4,"passes":1,"load_hint":0,"store_hint":false,"max_first":true,"ptx_stores":true,"aligned_rows":true,"one_pass_grid":true'
for how in ""; do
timeout 100 python3 bench/child_timing_check.py --kernel softmax --shape 65536x128 --min-ms 50 $how \
  --params "{\"block_threads\":256,\"row_threads\":8,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 100 python3 bench/child_timing_check.py --kernel softmax --shape 32768x512 --min-ms 50 $how \
  --params "{\"block_threads\":64,\"row_threads\":32,\"chunks\":4,\"cluster\":1,\"unroll\":1,$P}"
timeout 100 python3 bench/child_timing_check.py --kernel softmax --shape 16x262144 --min-ms 50 $how \
  --params '{"block_threads":512,"row_threads":512,"cluster":8,"vec":4,"passes":1,"chunks":8,"unroll":2,"load_hint":3,"store_hint":true,"push":true,"aligned_rows":true}'
done 2>&1 | grep -v "^\s*$" > $OUT/context.txt
cat $OUT/context.txt
