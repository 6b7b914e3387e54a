#!/usr/bin/env bash
# Session 16, call 5 (<= 240 s of timeouts): the GPU tests of what changed on the launch path
# for every family and has not run on a GPU: the launch contract's grid() and configure() with a
# cubin (this session), the sustain-at-least runs in the child and the vendor (12703ea), the
# float scalars of user families and the cubin parameter check (session 15: 9386bda, 8267587).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; mkdir -p /tmp/r
timeout -s KILL 110 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_user_family.py 2>&1 | tail -4 | tee -a $log
timeout -s KILL 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_eval.py 2>&1 | tail -4 | tee -a $log
cp -r /tmp/tf-gpu-out /tmp/r/ 2>/dev/null; tar czf $OUT/r.tgz -C /tmp r
