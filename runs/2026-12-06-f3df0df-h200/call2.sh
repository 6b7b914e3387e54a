#!/usr/bin/env bash
# at f3df0df's code (00ebab3 adds records and docs only), on an H200 only (exits 3 at once on
# another GPU): four of the other half's six files, as many as the device time left allows.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=f3df0df TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 tests/test_gpu_eval.py \
  tests/test_gpu_cheat.py tests/test_gpu_campaign_faults.py tests/test_gpu_loader.py > $OUT/pytest2.txt 2>&1
echo "pytest rc $?"; tail -12 $OUT/pytest2.txt
cd $OUT && tar czf r2.tgz gpu && rm -rf gpu
