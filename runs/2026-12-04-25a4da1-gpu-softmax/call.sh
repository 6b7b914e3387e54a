#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 25a4da1: the softmax family's gpu-marked tests after aligned_rows and
# one_pass_grid (7d9252f) and the flat to_dict (a7361cb).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
mkdir -p $OUT
timeout -s KILL 170 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/test_gpu_softmax.py   --durations=5 > $OUT/gpu-softmax.log 2>&1
tail -12 $OUT/gpu-softmax.log
