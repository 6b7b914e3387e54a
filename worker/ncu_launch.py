"""A minimal program for Nsight Compute to profile: load a cubin, launch the kernel twice.

    ncu … python -m worker.ncu_launch SPEC.json

numpy + pycuda + the standard library only, through the shared launch contract
(:mod:`worker.launch_contract`). ``SPEC.json``::

    {"cubin": "k.cubin", "kernel": "name", "seed": 0,
     "signature": Signature.resolve(dims), "launch": LaunchConfig.to_dict()}

Inputs are seeded normal values (never zeros); the first launch warms up, the second is the one
profiled (``--launch-skip 1 --launch-count 1``). A kernel whose launch has a workspace gets it
after its scalars; its prologue (which writes what the kernel reads from the workspace) runs
before each launch, its epilogue not at all (``ncu -k`` profiles the named kernel only).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from worker import launch_contract as lc


def main(argv: list[str]) -> int:
    """Launch twice and exit."""
    import pycuda.autoinit  # noqa: F401  (creates the context)
    import pycuda.driver as cuda

    with open(argv[0]) as fh:
        spec = json.load(fh)
    signature, launch = spec["signature"], spec["launch"]
    smem = int(launch["dynamic_smem_bytes"])
    ws_bytes = int(launch.get("workspace_bytes") or 0)
    bufs = lc.allocate(cuda, signature, reference=False)
    lc.upload_inputs(cuda, signature, bufs, np.random.default_rng(int(spec.get("seed", 0))))
    workspace = cuda.mem_alloc(ws_bytes) if ws_bytes else None
    with open(spec["cubin"], "rb") as fh:
        cubin = fh.read()
    module = cuda.module_from_buffer(cubin)
    fn = module.get_function(spec["kernel"])
    fn.prepare(lc.kernel_format(signature, workspace is not None))
    lc.configure(cuda, fn, launch, cubin)
    aux = lc.module_aux(module)
    for _ in range(2):
        lc.enqueue_aux(aux, launch.get("prologue"), signature, bufs, workspace, None)
        fn.prepared_call(lc.grid(fn, launch), tuple(launch["block"]),
                         *lc.kernel_args(signature, bufs, workspace), shared_size=smem)
    cuda.Context.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
