#!/usr/bin/env bash
# Session 10, call 1: the family-generic child on the GEMM and softmax, then softmax campaigns
# (replay data) and the scale_add test family's space. Run from the repository root with .whl.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/log.txt
echo "== GPU tests (GEMM through the new child, softmax)" | tee -a $OUT/log.txt
timeout -s KILL 170 python3 -m pytest -q -m gpu -x -p no:cacheprovider --durations=8 \
  tests/test_gpu_eval.py tests/test_gpu_softmax.py 2>&1 | tail -40 >> $OUT/log.txt
tail -3 $OUT/log.txt
tune() {  # kernel shape budget wall label
  timeout -s KILL $(( $4 + 60 )) python3 -m cli.main tune --backend gpu --kernel $1 --shape $2 \
    --budget $3 --wall-seconds $4 --db $OUT/campaigns.db --out /tmp/tfout --json 2>>$OUT/tune-err.txt \
    | tail -1 > /tmp/r.json
  python3 - "$5" <<'PY' | tee -a $OUT/log.txt
import json, sys
try:
    r = json.load(open("/tmp/r.json"))
except Exception as e:
    print(sys.argv[1], "no result", e); raise SystemExit
b = r.get("best") or {}
print(f"{sys.argv[1]:14s} {r['status']:6s} evals {r['evaluations']:3d} wall {r['wall_seconds']}s "
      f"best {b.get('avg_us')} us {b.get('throughput')} {r.get('unit')} it {b.get('iteration')} "
      f"vendor {r.get('vendor_us')} us pct_of_vendor {r.get('pct_of_vendor')}")
print("   params", json.dumps(b.get("params"), sort_keys=True))
PY
}
echo "== softmax campaigns" | tee -a $OUT/log.txt
tune softmax 8192x8192 60 40 sm-8192sq
tune softmax 65536x1024 60 40 sm-65536x1024
tune softmax 1024x131072 60 40 sm-1024x131k
echo "== scale_add (tests/families) whole space" | tee -a $OUT/log.txt
timeout -s KILL 90 python3 - <<'PY' 2>>$OUT/tune-err.txt | tail -1 | cut -c1-400 | tee -a $OUT/log.txt
import os, sys
sys.path.insert(0, "tests")
import kernels
from families.scale_add import FAMILY
kernels.register_family(FAMILY)
from cli.main import app
app(["tune", "--backend", "gpu", "--kernel", "scale_add", "--shape", "16777216", "--policy", "random",
     "--budget", "36", "--db", os.environ["OUT"] + "/campaigns.db", "--out", "/tmp/tfout", "--json"])
PY
tail -c 4000 $OUT/tune-err.txt > $OUT/tune-err-tail.txt; rm -f $OUT/tune-err.txt
ls -la $OUT
