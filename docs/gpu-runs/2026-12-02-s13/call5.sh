#!/usr/bin/env bash
# Session 13, call 5 (<= 360 s of timeouts): the GPU path after this session's launch-contract
# change (prologue kernels, aux launches): the split-K and stream-K GPU tests (epilogues), the
# evaluation tests, the per-tile bf16 GPU contract test, and Nsight Compute on the campaign's
# split-pass best (the ncu launcher runs the prologue before the profiled kernel).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=/tmp/r/gpu
log=$OUT/log.txt; mkdir -p /tmp/r/gpu
timeout -s KILL 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_split_k.py \
  tests/test_gpu_stream_k.py tests/test_gpu_eval.py 2>&1 | tail -4 | tee -a $log
timeout -s KILL 130 python3 -m pytest -q -m gpu -p no:cacheprovider -k per_tile \
  tests/test_gpu_wgmma.py::test_bf16_splits_pass_the_fp32_contract 2>&1 | tail -3 | tee -a $log
timeout -s KILL 55 python3 bench/ncu_sections.py --out /tmp/r/ncu --label pass-best \
  --params "$(cat docs/gpu-runs/2026-12-02-s13/call4/r/best-t1e-4.json)" 2>&1 | tail -12 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
