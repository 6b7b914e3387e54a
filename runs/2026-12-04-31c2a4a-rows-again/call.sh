#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 31c2a4a: the softmax rows call of 7d9252f (aligned_rows and
# one_pass_grid beside torch.compile, Triton and the copy: runs/2026-12-04-7d9252f-softmax-rows),
# then where a re-submitted GEMM set's time goes on the GPU host
# (runs/2026-12-04-31c2a4a-rows-again/call-part.sh). One tar comes back.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r/rows; log=$r/log.txt
OUT=$r/rows timeout -s KILL 200 bash runs/2026-12-04-7d9252f-softmax-rows/call.sh > /dev/null 2>&1
tail -45 $r/rows/script.txt | tee -a $log
source runs/2026-12-04-31c2a4a-rows-again/call-part.sh
