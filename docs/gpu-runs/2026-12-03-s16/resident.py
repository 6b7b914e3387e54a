"""Session 16, calls 1 and 2 (``resident.py [points.json]``). The CTAs the driver says are
resident at once for the points of a JSON list (worker.launch_contract.resident_ctas), beside
an estimate from registers, threads and shared memory alone (the rule book's in calls 1-3;
here since the rule book dropped it). Prints a table."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import pycuda.autoinit  # noqa: E402,F401

from kernels.base import Dims  # noqa: E402
from kernels.softmax import FAMILY, SoftmaxParams  # noqa: E402
from kernels.softmax.params import bulk_smem_bytes  # noqa: E402
from worker import launch_contract as lc  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402

compiler = Compiler(Path("/tmp/tf-cache"))


def estimate(p: SoftmaxParams, cols: int, sm_count: int = 132) -> int:
    """CTAs resident at once from registers, threads and shared memory, GPCs not counted."""
    smem = bulk_smem_bytes(p, cols) if p.bulk else p.staged_bytes
    regs = -(-p.estimated_registers // 8) * 8
    threads = p.block_threads
    per_sm = min(2048 // threads, 65536 // (threads * regs), 32, 228 * 1024 // (smem + 2048))
    cluster = p.cluster
    return max(cluster, sm_count * per_sm // cluster * cluster)
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
