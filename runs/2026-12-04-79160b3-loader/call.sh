#!/usr/bin/env bash
# 2026-12-04, nvidia-h200: the loader's plan-per-shape hot path (79160b3). Its GPU tests (eager,
# torch.compile(fullgraph=True), another thread, no context current), the user-family GPU
# tests, the loader bench (50 random shapes a family, overhead against the direct launch with
# and without its outputs allocated, a cProfile of the hot path), the C++ demo built with nvcc,
# and a one-file user family registered and tuned on the GPU. Short table last.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/test_gpu_loader.py tests/test_gpu_user_family.py > $OUT/gpu_tests.txt 2>&1
grep -E "passed|failed|error|dispatch adds" $OUT/gpu_tests.txt | tail -6 | tee -a $log
timeout -s KILL 200 python3 bench/loader_bench.py --out $OUT --work /tmp/lb > $OUT/loader_bench.txt 2>&1
tail -6 $OUT/loader_bench.txt | tee -a $log
python3 - <<'PY' 2>&1 | tee -a $log
import json, os
d = json.load(open(os.environ["OUT"] + "/loader_bench.json"))
for fam, f in d["families"].items():
    o = f["overhead"]
    print(fam, {k: round(v, 2) for k, v in o.items() if isinstance(v, float)})
    for r in o["profile"][:6]:
        print("   %-60s %6.2f us own" % (r["function"][-60:], r["own_us_a_call"]))
PY
nvcc -std=c++17 -O2 -I /tmp/lb/softmax examples/library/softmax_demo.cu -o /tmp/demo -lcuda \
  > $OUT/softmax_demo.txt 2>&1 && timeout 60 /tmp/demo /tmp/lb/softmax >> $OUT/softmax_demo.txt 2>&1
tail -3 $OUT/softmax_demo.txt | tee -a $log
mkdir -p /tmp/uf
timeout -s KILL 60 python3 -m cli.main family add tests/data/families/scaled_transpose \
  --db /tmp/uf/x.db > $OUT/user_family.txt 2>&1
timeout -s KILL 90 python3 -m cli.main tune --kernel scaled_transpose --backend gpu --budget 12 \
  --db /tmp/uf/x.db --out /tmp/uf/o >> $OUT/user_family.txt 2>&1
echo "user family tune rc=$?" | tee -a $log
tail -8 $OUT/user_family.txt | tee -a $log
