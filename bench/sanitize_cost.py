"""What one compute-sanitizer run costs at large shapes on this GPU (why the gate runs racecheck
at reduced shapes and memcheck also at the campaign's): a register-blocked double-buffered SIMT
kernel and a 3xTF32 kernel, racecheck at 4096³ and 2048³, memcheck at 4096³.

    python bench/sanitize_cost.py [--out measure.json] [--limit 170]

One JSON line per run (kernel, tool, shape, status, seconds of the whole run, seconds of the
launch under the tool); a run past ``--limit`` seconds is killed and reported so.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from kernels.base import Action, Candidate, LaunchConfig
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.sanitize import run_tool, sanitizer_path

CHAINS = {
    "simt_8x4_vec4_db": ("apply_coalesce(true)", "apply_shared_memory_load(true)",
                         "apply_register_block(8, 4)", "apply_vectorize(4)",
                         "apply_double_buffer(2)", "apply_block_swizzle(4)"),
    "tf32x3": ("apply_tf32x3(true)", "change_block_config(64, 2)"),
}
RUNS = (("racecheck", Shape(4096, 4096, 4096)), ("memcheck", Shape(4096, 4096, 4096)),
        ("racecheck", Shape(2048, 2048, 2048)))


def main() -> None:
    """Measure every kernel under every run of :data:`RUNS`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--limit", type=float, default=170.0, help="seconds per run")
    args = parser.parse_args()
    exe = sanitizer_path()
    if exe is None:
        raise SystemExit("compute-sanitizer is not on PATH")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        compiler = Compiler(Path(tmp) / "cache")
        for name, chain in CHAINS.items():
            node = FAMILY.apply_chain([Action.parse(a) for a in chain])
            assert isinstance(node, Candidate)
            params = node.params
            compiled = compiler.compile(FAMILY.render(params), entry=FAMILY.name,
                                        dynamic_smem_bytes=params.smem_bytes)
            cubin = Path(tmp) / f"{name}.cubin"
            cubin.write_bytes(compiled.cubin())
            for tool, shape in RUNS:
                launch = FAMILY.launch(params, shape)
                assert isinstance(launch, LaunchConfig)
                run = run_tool(exe, tool, cubin, [(shape, launch)], timeout_s=args.limit)
                rows.append({"kernel": name, "tool": tool, "shape": str(shape),
                             "status": run["status"], "seconds": run["seconds"],
                             "error": run.get("error"),
                             "launch_s": [r.get("seconds") for r in
                                          (run.get("launcher") or {}).get("launches", [])]})
                print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
