#!/usr/bin/env bash
# Session 13, call 1 (<= 560 s of timeouts): session 12's next.sh (the cluster push on the GPU:
# correctness, each long-row best beside its push twin, the campaigns again), then the vendor
# refactor of session 12's review (the GEMM vendor's inputs(), one torch poison) on the GPU,
# and the softmax test that times the plans beside torch, with room to finish.
bash docs/gpu-runs/2026-12-02-s12/next.sh
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt
for fs in "gemm_bias_relu 4096x4096x4096" "softmax 65536x128"; do
  set -- $fs
  r=$(timeout -s KILL 40 python3 -m worker.vendor --family $1 $2 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(r.get('avg_us', r.get('error')), r.get('flush'), r.get('poisoned_outputs'))")
  echo "vendor $1 $2: $r" | tee -a $log
done
timeout -s KILL 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py::test_plans_beside_torch 2>&1 | tail -3 | tee -a $log
