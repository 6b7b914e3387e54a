#!/usr/bin/env bash
# Run as `call.sh COMMIT` (carry .whl). On an H200: one GPU shape set at the eleven shapes of
# the softmax sweep, tuned on this GPU (the library timed on the H200 before was tuned on an
# H100), its library exported and timed through the loader beside torch.softmax,
# torch.compile, the Triton launches and the same-bytes copy, flushed and sustained. The three
# 1 GiB shapes get weight 2, 2048x65536 given first so that 4096x32768 starts from its best.
# TESTS=1 (on any GPU): the GPU tests of the loader's DeviceWarning and the vendor graph helper
# instead (they passed on an H100 at 61a40bf, h100-tests/); another GPU without it exits 3.
commit=${1:?usage: call.sh COMMIT}
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
if [[ "$name" != *H200* && -z "${TESTS:-}" ]]; then echo "not an H200: nothing run"; exit 3; fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit TUNEFORGE_GPU_OUT=$OUT/gpu
log=$OUT/log.txt; mkdir -p $OUT/gpu
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
if [[ -n "${TESTS:-}" ]]; then
  timeout ${TESTS_S:-300} python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 \
    tests/test_gpu_vendor.py tests/test_gpu_loader.py > $OUT/pytest.txt 2>&1
  echo "tests rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -14 $OUT/pytest.txt
  exit 0
fi
r=$OUT/r; mkdir -p $r
# SHAPES, EVALS, WALL, LIMIT: a smaller set where less device time is left (the peers then
# time SHAPES alone, within LIMIT seconds of the start)
shapes=${SHAPES:-65536x128,32768x512,16384x1024,65536x1024,8192x4096,2048x65536:2,4096x32768:2,8192x8192:2,1024x131072,16x262144,256x262144}
wall=${WALL:-222}
timeout -s KILL $(( wall + 28 )) python3 -m cli.main tune --backend gpu --kernel softmax \
  --shapes "$shapes" --budget ${EVALS:-900} --wall-seconds $wall --db "$r/tune.db" --out /tmp/tfout --json \
  2>"$r/tune-progress.txt" | tail -1 > "$r/tune.json"
echo "tune rc $? at $(( $(date +%s) - start ))s" | tee -a $log
python3 - "$r/tune.json" <<'PY' 2>&1 | tee -a $log
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("tune: no summary (killed?): the bests are still in tune.db")
print(f"tune: {r.get('status')} · {r.get('evaluations')} evaluations · {r.get('wall_seconds')} s")
for s in r.get("shapes", []):
    b = s.get("best") or {}
    p = b.get("params") or {}
    keys = ",".join(f"{k}={p[k]}" for k in ("block_threads", "row_threads", "cluster", "vec", "passes", "staged", "bulk") if k in p)
    print(f"  {s['shape']:>12s} {s.get('evaluations'):4} evals  best {b.get('avg_us')} us "
          f"{s.get('x_vendor')}x torch  {keys}")
PY
cp $r/tune.db /tmp/h200.db; gzip -f $r/tune.db
python3 -m cli.main library export --kernel softmax --db /tmp/h200.db --out /tmp/lib 2>&1 | tail -1 | tee -a $log
cp /tmp/lib/dispatch.json $r/ 2>/dev/null
left=$(( ${LIMIT:-585} - ($(date +%s) - start) ))
echo "peers get $(( left - 25 ))s" | tee -a $log
timeout -s KILL $left python3 bench/peer_quality.py --family softmax --campaigns /tmp/h200.db \
  --no-replay --bundle /tmp/lib --budget-s $(( left - 25 )) --out $r/q \
  ${SHAPES:+--shapes $(echo "$SHAPES" | sed 's/:[0-9.]*//g')} \
  2>$r/progress.txt > $r/softmax.txt
echo "softmax rc $? at $(( $(date +%s) - start ))s" | tee -a $log; tail -32 $r/softmax.txt
cd $OUT && tar czf r.tgz r && rm -rf r
