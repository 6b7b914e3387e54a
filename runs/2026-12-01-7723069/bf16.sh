#!/usr/bin/env bash
# Run 2026-12-01/7723069 (issue 22): the bf16x3 / bf16x6 precision splits of the wgmma kernel on the H200.
# Run from the repository root with .whl carried; at most ~8 minutes (each step has its limit).
#   1. GPU tests of the bf16 variants: correctness (4096³ three distributions, the awkward shapes,
#      8192³ for the best guesses) and SASS (where the image has cuobjdump)
#   2. speed: bf16 candidates and the tf32x3 campaign best at 4096³ and 8192³ against cuBLAS
#      fp32 and three cuBLAS bf16 GEMMs composed, flushed median and sustained (>= 250 ms)
#   3. calibration: each scheme's error class at K = 4096 and 8192 (precision.py's MEASURED)
#   4. compute-sanitizer memcheck + racecheck on the warp-specialized, lockstep and staged bf16x3
#      kernels and memcheck on bf16x6, at the family's sanitizer shapes and 4096³ (memcheck)
#   5. the tf32x3 wgmma GPU tests (their kernels render byte for byte as before), in what is left
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $log
python3 -c "import torch; print('torch', torch.__version__)" 2>&1 | tee -a $log
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 \
  > $OUT/clocks-power.csv 2>&1 &
smi=$!

echo "== 1 bf16 GPU tests" | tee -a $log
timeout -s KILL 170 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=4 \
  tests/test_gpu_wgmma.py -k bf16 > $OUT/1-bf16-tests.txt 2>&1
tail -15 $OUT/1-bf16-tests.txt | cut -c1-400 | tee -a $log
python3 - <<'PY' 2>&1 | tee -a $log
import json, os
p = os.environ["OUT"] + "/gpu/bf16_correctness.json"
if os.path.exists(p):
    d = json.load(open(p))
    print("worst errors by scheme (norm-relative, element / sum|a.b|):", json.dumps(d["worst"]))
    for r in d["rows"]:
        if r["status"] != "ok":
            print("  FAILED", r["shape"], r["status"], (r["error"] or "")[:160], json.dumps(r["params"], sort_keys=True))
PY

echo "== 2 speed (flushed / sustained)" | tee -a $log
timeout -s KILL 150 python3 bench/precision_speed.py --out $OUT 2>$OUT/2-speed-err.txt | tee -a $log
tail -5 $OUT/2-speed-err.txt | cut -c1-300 >> $log

echo "== 3 calibration" | tee -a $log
timeout -s KILL 60 python3 bench/precision_calibration.py --out $OUT 2>$OUT/3-calibration-err.txt | tee -a $log

echo "== 4 compute-sanitizer" | tee -a $log
timeout -s KILL 75 python3 - <<'PY' 2>&1 | tail -6 | tee -a $log
import json, os, sys
from pathlib import Path
sys.path.insert(0, "tests")
from bf16_points import BF3, BF3_LOCKSTEP, BF3_STAGED, BF6
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler, target_arch
from worker.sanitize import check, probe_gpu, summary_line
compiler = Compiler(Path("/tmp/tf-cache"), arch="sm_90", workers=os.cpu_count() or 4)
device = probe_gpu("0")
records = []
for label, p, tools in (("bf16x3 ws2", BF3, ("memcheck", "racecheck")),
                        ("bf16x3 lockstep", BF3_LOCKSTEP, ("memcheck", "racecheck")),
                        ("bf16x3 staged", BF3_STAGED, ("memcheck", "racecheck")),
                        ("bf16x6 ws1", BF6, ("memcheck",))):
    c = compiler.compile(FAMILY.render(p), entry=FAMILY.name,
                         dynamic_smem_bytes=FAMILY.dynamic_smem_bytes(p),
                         arch=target_arch(FAMILY, p, compiler.arch))
    r = check(FAMILY, p, c.cubin(), tools=tools, campaign_shape=Shape(4096, 4096, 4096),
              device=device)
    records.append({"label": label, "params": p.to_dict(), "record": r})
    print(f"{label:16s} {r['status']:8s} {summary_line(r)}", flush=True)
    json.dump(records, open(os.environ["OUT"] + "/4-sanitize.json", "w"), indent=1, default=str)
compiler.close()
PY

echo "== 5 tf32x3 wgmma GPU tests" | tee -a $log
left=$(( 470 - SECONDS )); [ $left -gt 100 ] && left=100
[ $left -gt 20 ] && timeout -s KILL $left python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_wgmma.py -k "not bf16" \
  > $OUT/5-tf32-tests.txt 2>&1
tail -4 $OUT/5-tf32-tests.txt | cut -c1-300 | tee -a $log
kill $smi 2>/dev/null
echo "total ${SECONDS} s" | tee -a $log
ls -la $OUT $OUT/gpu | tail -20
