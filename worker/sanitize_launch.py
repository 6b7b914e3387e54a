"""The program compute-sanitizer runs: load a cubin, launch the kernel once per shape, check it.

    compute-sanitizer --tool racecheck … python -m worker.sanitize_launch SPEC.json
    python -m worker.sanitize_launch --probe          # is there a usable GPU? (JSON on stdout)

numpy + pycuda + the standard library only (like :mod:`worker.ncu_launch`). ``SPEC.json``::

    {"cubin": "k.cubin", "seed": 0,
     "launches": [{"shape": [m, n, k], "launch": LaunchConfig.to_dict()}, ...]}

The launch contract of ``kernels.base.LaunchConfig``: the kernel ``(A, B, bias, C, M, N, K)``;
with ``workspace_bytes`` it takes the workspace as an eighth argument (allocated here and left
uninitialized, as the contract says: initcheck sees a kernel that reads what it never wrote)
and ``epilogue`` names a second kernel of the module, ``(workspace, bias, C, M, N, splits)``,
launched right after it.

For each launch: seeded normal inputs (never zeros), the output poisoned with a NaN pattern, one
launch, a synchronize, then the output compared with a float64 numpy reference, so that a run
under a tool is known to have executed the kernel to the end. The last stdout line starts with
:data:`MARKER` and holds a JSON object: ``status`` is ``ok`` (every launch ran; each one's output
check is in ``launches``), ``unavailable`` (no pycuda or no GPU, exit 2), ``launch_error`` (the
driver refused the launch) or ``fault`` (the kernel faulted; the CUDA context is gone), exit 3.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

MARKER = "TF_SANITIZE_RESULT "
POISON = 0x7FC0DEAD
#: norm-relative error allowed between the kernel and the float64 reference (the pass rule's
#: tolerance, DESIGN.md §4)
TOLERANCE = 1e-4


def emit(result: dict[str, Any]) -> None:
    """The result line the parent reads (flushed: a fault later must not lose it)."""
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


def check_output(out: np.ndarray, a: np.ndarray, b: np.ndarray,
                 bias: np.ndarray) -> dict[str, Any]:
    """Unwritten and non-finite elements, and the norm-relative error against float64."""
    unwritten = int(np.count_nonzero(out.view(np.uint32) == POISON))
    nonfinite = int(np.count_nonzero(~np.isfinite(out))) - unwritten
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64), 0.0)
    good = np.isfinite(out)
    err = np.linalg.norm(np.where(good, out.astype(np.float64) - ref, 0.0))
    norm = float(np.linalg.norm(ref))
    rel = float(err / norm) if norm > 0 else float(err)
    return {"unwritten": unwritten, "nonfinite": nonfinite, "rel_err": rel,
            "passed": unwritten == 0 and nonfinite == 0 and rel <= TOLERANCE}


def probe() -> int:
    """Print the device's name and arch, or why there is none."""
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        emit({"status": "unavailable", "error": f"pycuda cannot be imported: {exc}"})
        return 2
    try:
        cuda.init()
        if cuda.Device.count() < 1:
            raise RuntimeError("no CUDA device")
        dev = cuda.Device(0)
        major, minor = dev.compute_capability()
        emit({"status": "ok", "name": dev.name(), "arch": f"sm_{major}{minor}",
              "driver_version": int(cuda.get_driver_version())})
    except Exception as exc:  # no device, driver mismatch, …
        emit({"status": "unavailable", "error": f"no usable CUDA device: {exc}"})
        return 2
    return 0


def run(spec: dict[str, Any]) -> int:
    """Launch every entry of ``spec`` once; emit the result line."""
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        emit({"status": "unavailable", "error": f"pycuda cannot be imported: {exc}"})
        return 2
    try:
        cuda.init()
        context = cuda.Device(0).make_context()
    except Exception as exc:
        emit({"status": "unavailable", "error": f"no usable CUDA device: {exc}"})
        return 2
    done: list[dict[str, Any]] = []
    try:
        module = cuda.module_from_file(spec["cubin"])
        rng = np.random.default_rng(int(spec.get("seed", 0)))
        for entry in spec["launches"]:
            m, n, k = (int(x) for x in entry["shape"])
            launch = entry["launch"]
            smem = int(launch["dynamic_smem_bytes"])
            ws_bytes = int(launch.get("workspace_bytes") or 0)
            fn = module.get_function(launch["kernel_name"])
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            bias = rng.standard_normal(n, dtype=np.float32)
            a_d, b_d, bias_d = cuda.to_device(a), cuda.to_device(b), cuda.to_device(bias)
            c_d = cuda.mem_alloc(4 * m * n)
            cuda.memset_d32(c_d, POISON, m * n)
            bufs = [a_d, b_d, bias_d, c_d]
            args: list[Any] = [a_d, b_d, bias_d, c_d, np.int32(m), np.int32(n), np.int32(k)]
            if ws_bytes:
                bufs.append(cuda.mem_alloc(ws_bytes))
                args.append(bufs[-1])
            if smem > 48 * 1024:
                fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
            start = time.perf_counter()
            try:
                fn(*args, block=tuple(int(x) for x in launch["block"]),
                   grid=tuple(int(x) for x in launch["grid"]), shared=smem)
                epi = launch.get("epilogue")
                if epi:
                    module.get_function(epi["kernel_name"])(
                        bufs[-1], bias_d, c_d, np.int32(m), np.int32(n),
                        np.int32(int(epi["args"][-1])), block=tuple(int(x) for x in epi["block"]),
                        grid=tuple(int(x) for x in epi["grid"]))
            except cuda.LogicError as exc:  # refused before running (resources)
                emit({"status": "launch_error", "error": str(exc)[:400], "launches": done})
                return 3
            try:
                context.synchronize()
            except cuda.Error as exc:  # the kernel faulted (or the tool stopped it)
                emit({"status": "fault", "error": f"{type(exc).__name__}: {exc}"[:400],
                      "shape": [m, n, k], "launches": done})
                return 3
            seconds = time.perf_counter() - start
            out = np.empty((m, n), np.float32)
            cuda.memcpy_dtoh(out, c_d)
            done.append({"shape": [m, n, k], "seconds": round(seconds, 4),
                         **check_output(out, a, b, bias)})
            for buf in bufs:
                buf.free()
        emit({"status": "ok", "launches": done})
        return 0
    except cuda.Error as exc:  # a later call saw the fault
        emit({"status": "fault", "error": f"{type(exc).__name__}: {exc}"[:400],
              "launches": done})
        return 3
    finally:
        try:
            context.pop()
        except Exception:  # a faulted context may refuse; the process ends anyway
            pass


def main(argv: list[str]) -> int:
    """``--probe`` or ``SPEC.json``."""
    if argv == ["--probe"]:
        return probe()
    if len(argv) != 1:
        sys.stderr.write("usage: python -m worker.sanitize_launch SPEC.json | --probe\n")
        return 64
    with open(argv[0]) as fh:
        spec = json.load(fh)
    return run(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
