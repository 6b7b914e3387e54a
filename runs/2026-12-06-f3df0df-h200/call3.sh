#!/usr/bin/env bash
# at f3df0df's code, the same warm H200 as call2.sh (the command line as run): test_gpu_softmax.py
# but for its plan table and its two correctness sweeps (73 s of device time were left)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"; case "$name" in *H200*) ;; *) exit 3;; esac; python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu; mkdir -p $OUT/gpu; timeout 55 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_softmax.py -k "not plans_beside_torch and not awkward and not bulk" > $OUT/pytest3.txt 2>&1; echo "pytest rc $?"; tail -4 $OUT/pytest3.txt
