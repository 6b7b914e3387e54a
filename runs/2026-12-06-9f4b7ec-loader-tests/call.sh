#!/bin/bash
# at 9f4b7ec plus the new test: the loader's GPU tests, with the peers' harness timing a bundle
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 tests/test_gpu_loader.py \
  > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -12 $OUT/pytest.txt
