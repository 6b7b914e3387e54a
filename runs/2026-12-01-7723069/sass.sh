#!/usr/bin/env bash
# The bf16 split kernels' SASS and ptxas figures, on a machine without a GPU (nvcc 13 for
# sm_90a). Run from the repository root:
#   CUOBJDUMP=/tmp/tritonpkg/triton/backends/nvidia/bin/cuobjdump \
#     bash runs/2026-12-01-7723069/sass.sh > runs/2026-12-01-7723069/sass.txt
set -e
${PYTHON:-.venv/bin/python} - <<'PY'
import collections, re, subprocess, sys, tempfile
from pathlib import Path
sys.path[:0] = [".", "tests"]
from bf16_points import BF3, BF3_LOCKSTEP, BF3_STAGED, BF6
from sass_support import cuobjdump
from kernels.gemm_bias_relu import FAMILY
from worker.compile import Compiler, compile_candidate
compiler = Compiler(Path(tempfile.mkdtemp()), arch="sm_90", workers=4)
tool = cuobjdump()
nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip()
print(nvcc.splitlines()[-1], "|", tool)
for label, p in (("bf16x3 ws2 st2", BF3), ("bf16x3 ws2 staged", BF3_STAGED),
                 ("bf16x3 lockstep", BF3_LOCKSTEP), ("bf16x6 ws1", BF6)):
    r = compile_candidate(compiler, FAMILY, p)
    sass = subprocess.run([tool, "-sass", r.cubin_path], capture_output=True, text=True,
                          check=True).stdout
    ops = collections.Counter(m.group(0) for m in re.finditer(r"HGMMA\.[0-9A-Zx.]+", sass))
    local = {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("LDL", "STL", "HMMA")}
    print(f"\n{label}: {r.status} {r.arch}, {r.regs_per_thread} registers, spill bytes "
          f"{r.spill_bytes} (stores {r.spill_store_bytes}, loads {r.spill_load_bytes}), "
          f"smem {FAMILY.dynamic_smem_bytes(p)} B; {dict(local)}")
    print(f"  params {p.to_dict()}")
    for op, n in sorted(ops.items()):
        print(f"  {n:4d} x {op}")
    first = next(line.strip() for line in sass.splitlines() if "HGMMA" in line)
    print(f"  e.g. {first}")
compiler.close()
PY
