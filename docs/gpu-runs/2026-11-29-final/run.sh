#!/usr/bin/env bash
# Device call 3 (nvidia-h200): the whole gpu-marked suite at HEAD, then a 4096^3 campaign with the sanitizer gate.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/pip.log 2>&1 || { tail -20 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/src PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=/tmp/gpuout
cd .gpu/src
echo "commit $(cat ../commit.txt)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_gpu_eval.py tests/test_gpu_split_k.py tests/test_sanitize.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -8
timeout 120 python3 -m cli.main tune --backend gpu --budget 150 --sanitize --db /tmp/c.db --out /tmp/gpuout/campaign --json > "$OUT/tune.json" 2> "$OUT/tune.err"; echo "tune rc $?"
python3 - "$OUT/tune.json" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception as e:
    print("no tune json", e); raise SystemExit
b = r.get("best") or {}
print("tune", r["status"], r["reason"], "evals", r["evaluations"], "wall", r["wall_seconds"], "best", b.get("avg_us"), b.get("throughput_tflops"), "pct_of_vendor", r.get("pct_of_vendor"))
print("best params", json.dumps(b.get("params")))
print("sanitizer", json.dumps(r.get("sanitizer"))[:600])
PY
tar -czf "$OUT/gpuout.tgz" -C /tmp gpuout 2>/dev/null; ls -la "$OUT"
