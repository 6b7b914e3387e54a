"""Session 16, calls 1 and 2 (``resident.py [points.json]``). The CTAs the driver says are
resident at once for the points of a JSON list (worker.launch_contract.resident_ctas), beside
the rule book's estimate. Prints a table."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import pycuda.autoinit  # noqa: E402,F401

from kernels.base import Dims  # noqa: E402
from kernels.softmax import FAMILY  # noqa: E402
from kernels.softmax.rules import resident_ctas as estimate  # noqa: E402
from worker import launch_contract as lc  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402

compiler = Compiler(Path("/tmp/tf-cache"))
points = Path(__file__).with_name(sys.argv[1] if len(sys.argv) > 1 else "prefetch.json")
for pt in json.load(open(points)):
    p = FAMILY.params_from_dict(pt["params"])
    rows, cols = (int(v) for v in pt["shape"].split("x"))
    launch = FAMILY.launch(p, Dims({"rows": rows, "cols": cols})).to_dict()
    res = compile_candidate(compiler, FAMILY, p)
    cubin = res.cubin()
    n = lc.resident_ctas(cubin, "softmax", launch)
    sys.stdout.write(f"{pt['label']:<20} {pt['shape']:>12} regs {res.regs_per_thread:>3} "
                     f"grid {launch['grid'][0]:>6} resident {n:>4} (estimate "
                     f"{estimate(p, cols)}) persistent {bool(launch.get('persistent'))}\n")
