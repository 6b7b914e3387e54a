#!/bin/bash
# at 295881e: bench/child_timing_check.py on the softmax library's entries at 65536x128 and
# 32768x512 (the child's way, a non-blocking stream, a torch-like flush), three rounds each
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
P='"cluster":1,"vec":4,"passes":1,"unroll":1,"load_hint":0,"store_hint":false,"max_first":true,"ptx_stores":true,"aligned_rows":true,"one_pass_grid":true'
timeout 200 python3 bench/child_timing_check.py --kernel softmax --shape 65536x128 \
  --params "{\"block_threads\":256,\"row_threads\":8,\"chunks\":4,$P}" 2>&1 | tail -5
timeout 200 python3 bench/child_timing_check.py --kernel softmax --shape 32768x512 \
  --params "{\"block_threads\":64,\"row_threads\":32,\"chunks\":4,$P}" 2>&1 | tail -5
