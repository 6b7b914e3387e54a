"""The program compute-sanitizer runs: load a cubin, launch the kernel once per shape, check it.

    compute-sanitizer --tool racecheck … python -m worker.sanitize_launch SPEC.json
    python -m worker.sanitize_launch --probe          # is there a usable GPU? (JSON on stdout)

numpy + pycuda + the standard library only, through the shared launch contract
(:mod:`worker.launch_contract`, like :mod:`worker.gpu_child` and :mod:`worker.ncu_launch`).
``SPEC.json``::

    {"cubin": "k.cubin", "seed": 0, "tolerance": 1e-4,   # the campaign's
     "reference_cubin": "ref.cubin", "reference_kernel": "reference_…",   # optional
     "reference_style": "contract", "reference_outputs_dtype": "float64", # optional
     "launches": [{"shape": [values], "signature": Signature.resolve(dims),
                   "launch": LaunchConfig.to_dict(),
                   "reference_launch": LaunchConfig.to_dict()}, ...]}

The kernel takes the signature's buffers, then its scalars, then the workspace when the launch
has one (allocated here and left uninitialized, as the contract says: initcheck sees a kernel
that reads what it never wrote); the launch's ``epilogue`` runs right after it.

For each launch: seeded normal inputs (never zeros, one generator for the whole spec), the
outputs poisoned with a NaN pattern, the family's float64 reference kernel, one launch, a
synchronize, then each output compared with the reference (when the spec names one: unwritten
and NaN/Inf elements are counted in any case), so that a run under a tool is known to have
executed the kernel to the end. The last stdout line starts with :data:`MARKER` and holds a
JSON object: ``status`` is ``ok`` (every launch ran; each one's output check is in
``launches``), ``unavailable`` (no pycuda or no GPU, exit 2), ``launch_error`` (the driver
refused the launch) or ``fault`` (the kernel faulted; the CUDA context is gone), exit 3.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from worker import launch_contract as lc

MARKER = "TF_SANITIZE_RESULT "


def emit(result: dict[str, Any]) -> None:
    """The result line the parent reads (flushed: a fault later must not lose it)."""
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


def output_verdict(stats: dict[str, Any], checked: bool, tolerance: float) -> dict[str, Any]:
    """Unwritten and non-finite elements, and (``checked``: against a reference) the
    norm-relative and per-element scaled errors; passing needs every element written and
    finite and the norm-relative error within the campaign's ``tolerance``."""
    verdict = lc.judge(stats["sum_err2"], stats["sum_ref2"], stats["max_abs"],
                       stats["max_scaled"], stats["nonfinite"], stats["unwritten"], tolerance)
    rel = verdict["rel_err"] if checked else None
    return {"unwritten": stats["unwritten"], "nonfinite": stats["nonfinite"], "rel_err": rel,
            "max_scaled_err": verdict["max_scaled_err"] if checked else None,
            "passed": stats["unwritten"] == 0 and stats["nonfinite"] == 0
            and (rel is None or rel <= tolerance)}


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
        with open(spec["cubin"], "rb") as fh:
            cubin = fh.read()
        module = cuda.module_from_buffer(cubin)
        reference = (cuda.module_from_file(spec["reference_cubin"]).get_function(
            spec["reference_kernel"]) if spec.get("reference_cubin") else None)
        style = spec.get("reference_style", "contract")
        outputs_dtype = spec.get("reference_outputs_dtype", "float64")
        rng = np.random.default_rng(int(spec.get("seed", 0)))
        for entry in spec["launches"]:
            shape = list(entry["shape"])
            signature, launch = entry["signature"], entry["launch"]
            ws_bytes = int(launch.get("workspace_bytes") or 0)
            fn = module.get_function(launch["kernel_name"])
            fn.prepare(lc.kernel_format(signature, bool(ws_bytes)))
            checked = reference is not None and entry.get("reference_launch") is not None
            bufs = lc.allocate(cuda, signature, reference=checked)
            lc.upload_inputs(cuda, signature, bufs, rng)
            lc.poison_outputs(cuda, signature, bufs)
            ws = cuda.mem_alloc(ws_bytes) if ws_bytes else None
            lc.configure(cuda, fn, launch, cubin)

            start = time.perf_counter()
            host_refs: dict[str, np.ndarray] = {}
            try:
                if checked:
                    ref_launch = entry["reference_launch"]
                    assert reference is not None
                    reference.prepare(lc.reference_format(signature, style))
                    reference.prepared_call(
                        tuple(ref_launch["grid"]), tuple(ref_launch["block"]),
                        *lc.reference_args(signature, bufs, style, outputs_dtype),
                        shared_size=int(ref_launch.get("dynamic_smem_bytes") or 0))
                    if style == "same_signature" and outputs_dtype == "float32":
                        # the reference wrote the outputs: keep them, poison them again
                        context.synchronize()
                        for buf in lc.outputs(signature):
                            out32 = np.empty(int(buf["count"]), np.float32)
                            cuda.memcpy_dtoh(out32, bufs[buf["name"]])
                            host_refs[buf["name"]] = out32.astype(np.float64)
                        lc.poison_outputs(cuda, signature, bufs)
                lc.enqueue(fn, lc.module_aux(module), launch, signature, bufs, ws, None)
            except cuda.LogicError as exc:  # refused before running (resources)
                emit({"status": "launch_error", "error": str(exc)[:400], "launches": done})
                return 3
            try:
                context.synchronize()
            except cuda.Error as exc:  # the kernel faulted (or the tool stopped it)
                emit({"status": "fault", "error": f"{type(exc).__name__}: {exc}"[:400],
                      "shape": shape, "launches": done})
                return 3
            seconds = time.perf_counter() - start
            parts = []
            for buf in lc.outputs(signature):
                out = np.empty(int(buf["count"]), lc.NUMPY_DTYPES[buf["dtype"]])
                cuda.memcpy_dtoh(out, bufs[buf["name"]])
                ref = np.zeros(out.size, np.float64)
                scale = np.ones(out.size, np.float64)
                if checked and buf["name"] in host_refs:
                    ref = host_refs[buf["name"]]
                elif checked:
                    cuda.memcpy_dtoh(ref, bufs[lc.ref_name(buf["name"])])
                    if style == "contract":  # a same-signature reference writes no scale
                        cuda.memcpy_dtoh(scale, bufs[lc.scale_name(buf["name"])])
                parts.append(lc.host_stats(out, ref, scale))
            done.append({"shape": shape, "seconds": round(seconds, 4),
                         **output_verdict(lc.merge_stats(parts), checked,
                                                          float(spec["tolerance"]))})
            lc.free(bufs)
            if ws is not None:
                ws.free()
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
