#!/usr/bin/env bash
# at 44484ab, on an H200 only (exits 3 at once on another GPU; the first try that found an H100
# ran runs/2026-12-06-44484ab-pass-copy/call.sh there): the six GPU tests not yet run on an
# H200 (test_plans_beside_torch and tests/test_gpu_user_family.py); the softmax library of the
# 553da7c database timed by the child and, through the exported bundle's loader, by the peers'
# harness beside torch.compile, Triton and the copy; then the GPU tests of a sustained run
# (95251e2 checks the sustained graph on its own output).
# From a5be515 on, the three tests whose subprocess a5be515 moved into gpu_support.run_script
# come first (capped at 100 s). At 9ce5a42 they ran on any GPU; they passed on an H100 twice
# (../2026-12-06-9ce5a42-run-script/), and since then another GPU exits at once again.
# Run as `call.sh COMMIT`: the device's copy of the tree has no .git to name its commit.
commit=${1:?usage: call.sh COMMIT (the commit of the tree it runs on)}
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit \
  TUNEFORGE_GPU_OUT=$OUT/gpu
mkdir -p $OUT/gpu $OUT/gpu2 $OUT/gpu0
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
if [ -z "${SHORT:-}" ]; then  # SHORT=1: the H200-only parts alone (their H100 runs stand)
TUNEFORGE_GPU_OUT=$OUT/gpu0 timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=4 \
  tests/test_gpu_eval.py::test_new_fill_kinds_and_the_copy_bandwidth \
  tests/test_gpu_split_k.py tests/test_gpu_wgmma.py -k "fill_kinds or repeated or lost_a_step" \
  > $OUT/pytest0.txt 2>&1
echo "run_script tests rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -8 $OUT/pytest0.txt
fi
if [ -z "${SOFTMAX_ONLY:-}" ]; then  # SOFTMAX_ONLY=1: the softmax library alone (SHORT too)
left=200
echo "pytest gets ${left}s" | tee -a $log
timeout $left python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 \
  tests/test_gpu_softmax.py::test_plans_beside_torch tests/test_gpu_user_family.py > $OUT/pytest.txt 2>&1
echo "pytest rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -14 $OUT/pytest.txt
fi
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
rm -rf /tmp/smlib
python3 -m cli.main library export --kernel softmax --db /tmp/sm.db --out /tmp/smlib 2>&1 | tail -1 | tee -a $log
# SHAPES, BUDGET_S, KILL_S: fewer shapes in less time, where little device time is left
timeout -s KILL ${KILL_S:-190} python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --bundle /tmp/smlib --budget-s ${BUDGET_S:-200} ${SHAPES:+--shapes $SHAPES} \
  --out $OUT/q 2>$OUT/progress.txt > $OUT/softmax.txt
echo "softmax rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -32 $OUT/softmax.txt
if [ -z "${SHORT:-}" ]; then
left=60
echo "sustained pytest gets ${left}s" | tee -a $log
TUNEFORGE_GPU_OUT=$OUT/gpu2 timeout $left python3 -m pytest -m gpu -q -p no:cacheprovider \
  --durations=8 -k sustained tests/test_gpu_wgmma.py tests/test_gpu_softmax.py \
  tests/test_gpu_cheat.py > $OUT/pytest2.txt 2>&1
echo "sustained pytest rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -14 $OUT/pytest2.txt
fi
cd $OUT && tar czf r.tgz gpu gpu0 gpu2 q && rm -rf gpu gpu0 gpu2 q
