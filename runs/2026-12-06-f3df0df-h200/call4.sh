#!/usr/bin/env bash
# at f3df0df's code, the same warm H200 (the command line as run): the two correctness sweeps of
# test_gpu_softmax.py (-k awkward selects both); 39 s of device time were left
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu; mkdir -p $OUT/gpu; timeout 28 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_softmax.py -k "awkward" > $OUT/pytest4.txt 2>&1; echo "pytest rc $?"; tail -3 $OUT/pytest4.txt
