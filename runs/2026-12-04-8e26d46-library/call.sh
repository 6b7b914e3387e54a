#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 8e26d46: the loader's hot path after the pointer array and the
# kept workspace (its GPU tests, the user family's GPU tests, bench/loader_bench.py), a probe of
# the GEMM's vendor fallback at small shapes, then an 8-shape GEMM set against one campaign a
# shape and the set's exported library at 16 held-out shapes (bench/gpu_sets_heldout.sh gemm).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt
d=runs/2026-12-04-8e26d46-library
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
timeout -s KILL 170 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/test_gpu_loader.py tests/test_gpu_user_family.py > $OUT/gpu_tests.txt 2>&1
grep -E "passed|failed|error" $OUT/gpu_tests.txt | tail -4 | tee -a $log
timeout -s KILL 150 python3 bench/loader_bench.py --out $OUT --work /tmp/lb > $OUT/loader_bench.txt 2>&1
tail -4 $OUT/loader_bench.txt | tee -a $log
python3 - <<'PY' 2>&1 | tee -a $log
import json, os
d = json.load(open(os.environ["OUT"] + "/loader_bench.json"))
for fam, f in d["families"].items():
    o = f["overhead"]
    print(fam, {k: round(v, 2) for k, v in o.items() if isinstance(v, float)})
PY
timeout -s KILL 60 python3 $d/fallback_probe.py > $OUT/fallback_probe.txt 2>&1
cut -c1-300 $OUT/fallback_probe.txt | tee -a $log
mkdir -p $OUT/sets
OUT=$OUT/sets TOTAL_S=290 timeout -s KILL 300 bash bench/gpu_sets_heldout.sh gemm > $OUT/sets.txt 2>&1
tail -14 $OUT/sets.txt | tee -a $log
