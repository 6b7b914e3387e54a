"""The long-lived GPU evaluation child: one process per GPU, numpy + pycuda + the standard library.

Spawned by :mod:`worker.gpu_runner` with ``CUDA_VISIBLE_DEVICES`` pinning one GPU. It speaks a
length-prefixed pickle protocol on stdin/stdout (requests are dicts with an ``op``), keeps its
CUDA context, buffers and loaded modules between requests, and never imports tuneforge's other
packages: it starts fast and runs on any GPU host.

A kernel fault (illegal address, …) corrupts the CUDA context: the child answers
``{"status": "crashed"}`` and exits; the parent starts a new one. A kernel that never finishes is
killed from outside by the parent's watchdog.
"""

from __future__ import annotations

import math
import os
import pickle
import struct
import sys
import time
import traceback
from typing import IO, Any

import numpy as np

try:  # the parent reports a missing pycuda as the backend being unavailable
    import pycuda.driver as cuda
except ImportError as exc:  # pragma: no cover - depends on the host
    cuda = None
    _IMPORT_ERROR: str | None = repr(exc)
else:
    _IMPORT_ERROR = None

POISON = 0x7FC0DEAD
DISTS = {"normal": 0, "uniform": 1, "mixed": 2, "symmetric": 3}
FILL_THREADS = 256
#: pycuda argument formats of the launch contract (``kernels.base.LaunchConfig``): the kernel
#: ``(A, B, bias, C, M, N, K)``, with a workspace ``(A, B, bias, C, M, N, K, workspace)``, and
#: the epilogue kernel of a workspace launch ``(workspace, bias, C, M, N, splits)``.
KERNEL_ARGS = "PPPPiii"
KERNEL_WS_ARGS = "PPPPiiiP"
EPILOGUE_ARGS = "PPPiii"


# ---- framing --------------------------------------------------------------------------------
def send(stream: IO[bytes], obj: Any) -> None:
    """Write one framed message."""
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(blob)))
    stream.write(blob)
    stream.flush()


def recv(stream: IO[bytes]) -> Any:
    """Read one framed message; ``EOFError`` when the peer has gone."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("peer closed the pipe")
    (size,) = struct.unpack("<Q", head)
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError("peer closed the pipe mid-message")
    return pickle.loads(blob)


def judge(sum_err2: float, sum_ref2: float, max_abs: float, max_scaled: float,
          nonfinite: int, unwritten: int, tol: float) -> dict[str, Any]:
    """The pass rule of DESIGN.md §4 from the error statistics of one case.

    Passing needs every element written and finite, a global bound (norm-relative error) and a
    local one (each element's error over its ``Σ|a·b| + |bias|``, which a wrong tail element
    cannot hide behind), both within ``tol``. No relative-only rule: near zero after ReLU it
    rejects correct kernels (the seed's first bug).
    """
    rel = math.sqrt(sum_err2 / sum_ref2) if sum_ref2 > 0 else (0.0 if sum_err2 == 0 else math.inf)
    reasons = []
    if unwritten:
        reasons.append(f"{unwritten} output element(s) never written")
    if nonfinite:
        reasons.append(f"{nonfinite} output element(s) NaN or Inf")
    if not rel <= tol:
        reasons.append(f"norm-relative error {rel:.3g} > {tol:g}")
    if not max_scaled <= tol:
        reasons.append(f"element error / sum|a*b| {max_scaled:.3g} > {tol:g}")
    return {"rel_err": rel, "max_abs_err": max_abs, "max_scaled_err": max_scaled,
            "nonfinite": nonfinite, "unwritten": unwritten,
            "passed": not reasons, "reason": "; ".join(reasons) or None}


def host_stats(out: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> dict[str, Any]:
    """The statistics of the ``tf_check`` kernel computed with numpy (CPU tests, cross-checks)."""
    out = np.asarray(out, np.float32).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    scale = np.asarray(scale, np.float64).ravel()
    unwritten_mask = out.view(np.uint32) == POISON
    nonfinite_mask = ~np.isfinite(out) & ~unwritten_mask
    ok = ~(unwritten_mask | nonfinite_mask)
    err = np.abs(out[ok].astype(np.float64) - ref[ok])
    return {
        "sum_err2": float(np.sum(err * err)), "sum_ref2": float(np.sum(ref[ok] ** 2)),
        "max_abs": float(err.max()) if err.size else 0.0,
        "max_scaled": float((err / np.maximum(scale[ok], 1e-30)).max()) if err.size else 0.0,
        "nonfinite": int(nonfinite_mask.sum()), "unwritten": int(unwritten_mask.sum()),
    }


class KernelFault(Exception):
    """The CUDA context is no longer usable (illegal address, launch failure, …)."""


# ---- the runtime ----------------------------------------------------------------------------
class Runtime:
    """Loads cubins, owns buffers, launches, times; all on one device."""

    def __init__(self) -> None:
        assert cuda is not None
        cuda.init()
        self.device = cuda.Device(0)
        self.context = self.device.make_context()
        self.stream = cuda.Stream()
        self.modules: dict[str, Any] = {}
        self.buffers: dict[tuple[int, int, int], dict[str, Any]] = {}
        self.support: Any = None
        self.reference: Any = None
        self.reference_block = (16, 16, 1)
        self.reference_tile = 64
        attrs = cuda.device_attribute
        self.l2_bytes = int(self.device.get_attribute(attrs.L2_CACHE_SIZE))
        self.flush_n = max(self.l2_bytes * 4, 64 << 20) // 4
        self.flush_buf = cuda.mem_alloc(self.flush_n * 4)
        self.stats = cuda.mem_alloc(4 * 8)
        self.counts = cuda.mem_alloc(2 * 8)
        self.events: list[tuple[Any, Any]] = []
        self.sm_count = int(self.device.get_attribute(attrs.MULTIPROCESSOR_COUNT))
        self.ws: Any = None
        self.ws_bytes = 0

    # -- device ------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Name, limits and clocks of the device."""
        a = cuda.device_attribute
        get = self.device.get_attribute
        cc = self.device.compute_capability()
        free, total = cuda.mem_get_info()
        return {
            "name": self.device.name(),
            "compute_capability": f"{cc[0]}.{cc[1]}",
            "arch": f"sm_{cc[0]}{cc[1]}",
            "sm_count": self.sm_count,
            "clock_khz": int(get(a.CLOCK_RATE)),
            "memory_clock_khz": int(get(a.MEMORY_CLOCK_RATE)),
            "memory_bus_width": int(get(a.GLOBAL_MEMORY_BUS_WIDTH)),
            "l2_bytes": self.l2_bytes,
            "max_smem_per_block_optin": int(get(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)),
            "max_smem_per_sm": int(get(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)),
            "max_regs_per_sm": int(get(a.MAX_REGISTERS_PER_MULTIPROCESSOR)),
            "max_threads_per_sm": int(get(a.MAX_THREADS_PER_MULTIPROCESSOR)),
            "max_blocks_per_sm": int(get(a.MAX_BLOCKS_PER_MULTIPROCESSOR)),
            "memory_total": int(total),
            "memory_free": int(free),
            "driver_version": int(cuda.get_driver_version()),
        }

    def setup(self, support_cubin: bytes, reference_cubin: bytes, reference_kernel: str,
              reference_block: tuple[int, int, int], reference_tile: int) -> None:
        """Load the support kernels and the family's float64 reference."""
        self.support = cuda.module_from_buffer(support_cubin)
        self.fill = self.support.get_function("tf_fill")
        self.fill.prepare("PqQif")
        self.poison = self.support.get_function("tf_poison")
        self.poison.prepare("Pq")
        self.check = self.support.get_function("tf_check")
        self.check.prepare("PPPqPP")
        self.flush = self.support.get_function("tf_flush")
        self.flush.prepare("Pq")
        self.reference = cuda.module_from_buffer(reference_cubin).get_function(reference_kernel)
        self.reference.prepare("PPPPPiii")
        self.reference_block = tuple(reference_block)  # type: ignore[assignment]
        self.reference_tile = reference_tile

    def kernel(self, key: str, cubin: bytes | None, name: str, smem: int,
               workspace: bool = False) -> Any:
        """The loaded function for ``key`` (loading ``cubin`` the first time); ``workspace``:
        the kernel takes the workspace as its eighth argument (a split-K launch)."""
        fn = self.modules.get(key)
        if fn is None:
            if cubin is None:
                raise KeyError(f"kernel {key} is not loaded and no cubin was sent")
            if len(self.modules) > 64:
                self.modules.clear()
            module = cuda.module_from_buffer(cubin)
            fn = module.get_function(name)
            fn._tf_module = module  # keep the module alive with the function
            fn._tf_epilogues = {}
            fn.prepare(KERNEL_WS_ARGS if workspace else KERNEL_ARGS)
            self.modules[key] = fn
        if smem > 48 * 1024:
            fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
        return fn

    # -- buffers -------------------------------------------------------------------------------
    def bufs(self, shape: tuple[int, int, int]) -> dict[str, Any]:
        """Device buffers for a shape (A, B, bias, C, ref, scale), reused across requests."""
        found = self.buffers.get(shape)
        if found is not None:
            return found
        m, n, k = shape
        if len(self.buffers) >= 8:  # keep memory bounded: drop the largest shapes first
            for key in sorted(self.buffers, key=lambda s: -(s[0] * s[1] + s[2] * (s[0] + s[1]))):
                self.buffers.pop(key)
                if len(self.buffers) < 8:
                    break
        found = {
            "A": cuda.mem_alloc(4 * m * k), "B": cuda.mem_alloc(4 * k * n),
            "bias": cuda.mem_alloc(4 * n), "C": cuda.mem_alloc(4 * m * n),
            "ref": cuda.mem_alloc(8 * m * n), "scale": cuda.mem_alloc(8 * m * n),
        }
        self.buffers[shape] = found
        return found

    def _grid1d(self, n: int) -> tuple[int, int, int]:
        return (max(1, min(-(-n // FILL_THREADS), self.sm_count * 16)), 1, 1)

    def fill_inputs(self, shape: tuple[int, int, int], seed: int, dist: str) -> dict[str, Any]:
        """Fresh seeded inputs of distribution ``dist`` and their float64 reference."""
        m, n, k = shape
        b = self.bufs(shape)
        code = DISTS[dist]
        for i, (name, count) in enumerate((("A", m * k), ("B", k * n), ("bias", n))):
            sub = (seed * 0x9E3779B1 + i * 0x632BE5AB) & 0xFFFFFFFFFFFFFFFF
            self.fill.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                                          b[name], count, sub, code, 1.0)
        tile = self.reference_tile
        grid = (-(-n // tile), -(-m // tile), 1)
        self.reference.prepared_async_call(grid, self.reference_block, self.stream, b["A"],
                                           b["B"], b["bias"], b["ref"], b["scale"], m, n, k)
        return b

    def workspace(self, nbytes: int) -> Any:
        """A device workspace of at least ``nbytes`` (one, grown as needed and shared by every
        launch: launches are serial on the stream and each writes what it reads back)."""
        if nbytes > self.ws_bytes:
            if self.ws is not None:
                self.ws.free()
                self.ws, self.ws_bytes = None, 0
            size = -(-nbytes // (1 << 20)) * (1 << 20)
            self.ws = cuda.mem_alloc(size)
            self.ws_bytes = size
        return self.ws

    @staticmethod
    def epilogue(fn: Any, name: str) -> Any:
        """The epilogue kernel ``name`` of ``fn``'s module (prepared once)."""
        found = fn._tf_epilogues.get(name)
        if found is None:
            found = fn._tf_module.get_function(name)
            found.prepare(EPILOGUE_ARGS)
            fn._tf_epilogues[name] = found
        return found

    def launch(self, fn: Any, launch: dict[str, Any], b: dict[str, Any],
               shape: tuple[int, int, int]) -> None:
        """Enqueue one launch of a candidate: its kernel and, for a workspace launch (split-K),
        the epilogue kernel right after it on the same stream. The workspace must have been
        sized beforehand (:meth:`workspace`), outside any timed region."""
        m, n, k = shape
        ws_bytes = int(launch.get("workspace_bytes") or 0)
        if not ws_bytes:
            fn.prepared_async_call(tuple(launch["grid"]), tuple(launch["block"]), self.stream,
                                   b["A"], b["B"], b["bias"], b["C"], m, n, k,
                                   shared_size=int(launch["dynamic_smem_bytes"]))
            return
        if ws_bytes > self.ws_bytes:
            raise ValueError(f"launch needs a {ws_bytes} B workspace; {self.ws_bytes} B sized")
        fn.prepared_async_call(tuple(launch["grid"]), tuple(launch["block"]), self.stream,
                               b["A"], b["B"], b["bias"], b["C"], m, n, k, self.ws,
                               shared_size=int(launch["dynamic_smem_bytes"]))
        epi = launch["epilogue"]
        self.epilogue(fn, epi["kernel_name"]).prepared_async_call(
            tuple(epi["grid"]), tuple(epi["block"]), self.stream, self.ws, b["bias"], b["C"],
            m, n, int(epi["args"][-1]))

    def sync(self) -> None:
        """Wait for the stream; a kernel fault becomes :class:`KernelFault`."""
        try:
            self.stream.synchronize()
        except cuda.Error as exc:
            raise KernelFault(str(exc)) from exc

    # -- correctness ---------------------------------------------------------------------------
    def check_case(self, fn: Any, launch: dict[str, Any], shape: tuple[int, int, int],
                   seed: int, dist: str, tol: float) -> dict[str, Any]:
        """One correctness case: fresh inputs, poisoned output, launch, on-GPU error stats."""
        m, n, _ = shape
        b = self.fill_inputs(shape, seed, dist)
        count = m * n
        self.poison.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                                        b["C"], count)
        ws_bytes = int(launch.get("workspace_bytes") or 0)
        if ws_bytes:  # poisoned too: a partial sum the kernel fails to write shows up as NaN
            ws = self.workspace(ws_bytes)
            self.poison.prepared_async_call(self._grid1d(ws_bytes // 4), (FILL_THREADS, 1, 1),
                                            self.stream, ws, ws_bytes // 4)
        cuda.memset_d32_async(self.stats, 0, 8, self.stream)
        cuda.memset_d32_async(self.counts, 0, 4, self.stream)
        self.sync()
        start = time.perf_counter()
        self.launch(fn, launch, b, shape)
        self.sync()
        kernel_s = time.perf_counter() - start
        self.check.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                                       b["C"], b["ref"], b["scale"], count, self.stats,
                                       self.counts)
        self.sync()
        stats = np.empty(4, np.float64)
        counts = np.empty(2, np.uint64)
        cuda.memcpy_dtoh(stats, self.stats)
        cuda.memcpy_dtoh(counts, self.counts)
        verdict = judge(float(stats[0]), float(stats[1]), float(stats[2]), float(stats[3]),
                        int(counts[0]), int(counts[1]), tol)
        return {"shape": list(shape), "seed": seed, "dist": dist, **verdict,
                "kernel_seconds": round(kernel_s, 6)}

    def stats_of(self, out: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> dict[str, Any]:
        """Run ``tf_check`` on host arrays; same keys as :func:`host_stats`."""
        out_d = cuda.to_device(np.ascontiguousarray(out, np.float32))
        ref_d = cuda.to_device(np.ascontiguousarray(ref, np.float64))
        scale_d = cuda.to_device(np.ascontiguousarray(scale, np.float64))
        count = int(np.asarray(out).size)
        cuda.memset_d32(self.stats, 0, 8)
        cuda.memset_d32(self.counts, 0, 4)
        self.check.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                                       out_d, ref_d, scale_d, count, self.stats, self.counts)
        self.sync()
        stats = np.empty(4, np.float64)
        counts = np.empty(2, np.uint64)
        cuda.memcpy_dtoh(stats, self.stats)
        cuda.memcpy_dtoh(counts, self.counts)
        return {"sum_err2": float(stats[0]), "sum_ref2": float(stats[1]),
                "max_abs": float(stats[2]), "max_scaled": float(stats[3]),
                "nonfinite": int(counts[0]), "unwritten": int(counts[1])}

    # -- timing --------------------------------------------------------------------------------
    def _events(self, count: int) -> list[tuple[Any, Any]]:
        while len(self.events) < count:
            self.events.append((cuda.Event(), cuda.Event()))
        return self.events[:count]

    def time_launches(self, fns: list[tuple[Any, dict[str, Any]]], b: dict[str, Any],
                      shape: tuple[int, int, int], reps: int) -> list[list[float]]:
        """Time ``reps`` launches of each function, interleaved, L2 flushed before each.

        One event pair encloses everything a launch enqueues (a split-K launch's kernel and its
        epilogue: the user pays for both). Returns microseconds per launch, one list per
        function.
        """
        events = self._events(reps * len(fns))
        slot = 0
        for _ in range(reps):
            for fn, launch in fns:
                self.flush.prepared_async_call(self._grid1d(self.flush_n), (FILL_THREADS, 1, 1),
                                               self.stream, self.flush_buf, self.flush_n)
                start, end = events[slot]
                start.record(self.stream)
                self.launch(fn, launch, b, shape)
                end.record(self.stream)
                slot += 1
        self.sync()
        out: list[list[float]] = [[] for _ in fns]
        for i in range(slot):
            start, end = events[i]
            out[i % len(fns)].append(end.time_since(start) * 1000.0)
        return out

    def benchmark(self, entries: list[tuple[Any, dict[str, Any]]], shape: tuple[int, int, int],
                  seed: int, runs: int, target_run_ms: float, max_reps: int,
                  warmup: int) -> dict[str, Any]:
        """Warm-up, then ``runs`` runs of adaptive repetitions; each run is a median."""
        b = self.fill_inputs(shape, seed, "normal")
        self.workspace(max(int(launch.get("workspace_bytes") or 0) for _, launch in entries))
        self.sync()
        first = self.time_launches(entries, b, shape, max(1, warmup))
        slowest_us = max(max(t) for t in first)
        reps = int(max(1, min(max_reps, math.ceil(target_run_ms * 1000.0 / max(slowest_us, 1.0)
                                                  / len(entries)))))
        per_fn_runs: list[list[float]] = [[] for _ in entries]
        samples: list[list[float]] = [[] for _ in entries]
        for _ in range(runs):
            times = self.time_launches(entries, b, shape, reps)
            for i, series in enumerate(times):
                per_fn_runs[i].append(float(np.median(series)))
                samples[i].extend(series)
        return {"reps_per_run": reps, "warmup_us": first, "runs_us": per_fn_runs,
                "samples_us": samples}


# ---- request handling -----------------------------------------------------------------------
def handle(rt: Runtime, req: dict[str, Any]) -> dict[str, Any]:
    """Serve one request (see :mod:`worker.gpu_runner` for the fields)."""
    op = req["op"]
    if op == "ping":
        return {"status": "ok"}
    if op == "info":
        return {"status": "ok", "info": rt.info()}
    if op == "setup":
        rt.setup(req["support_cubin"], req["reference_cubin"], req["reference_kernel"],
                 req["reference_block"], req["reference_tile"])
        return {"status": "ok", "info": rt.info()}
    if op == "stats":  # the on-GPU checker applied to given arrays (cross-check with numpy)
        return {"status": "ok", "stats": rt.stats_of(req["out"], req["ref"], req["scale"])}
    if op == "evaluate":
        cand = req["candidate"]
        cases: list[dict[str, Any]] = []
        try:
            fns: dict[str, Any] = {}
            for case in req["checks"]:
                launch = case["launch"]
                fn = rt.kernel(cand["key"], cand["cubin"], cand["kernel"],
                               int(launch["dynamic_smem_bytes"]),
                               workspace=bool(launch.get("workspace_bytes")))
                fns[cand["key"]] = fn
                cases.append(rt.check_case(fn, launch, tuple(case["shape"]), case["seed"],
                                           case["dist"], req["tol"]))
                if not cases[-1]["passed"] and req.get("stop_on_failure", True):
                    break
        except cuda.LogicError as exc:  # launch refused (resources): the context survives
            return {"status": "launch_error", "error": str(exc)[:400], "cases": cases}
        result: dict[str, Any] = {"status": "ok", "cases": cases}
        fn0 = next(iter(fns.values()), None)
        if fn0 is not None:
            result["function"] = {"regs_per_thread": fn0.num_regs,
                                  "local_bytes": fn0.local_size_bytes,
                                  "static_smem_bytes": fn0.shared_size_bytes}
        if req.get("bench") and cases and all(c["passed"] for c in cases):
            bench = req["bench"]
            entries = [(rt.kernel(cand["key"], cand["cubin"], cand["kernel"],
                                  int(bench["launch"]["dynamic_smem_bytes"]),
                                  workspace=bool(bench["launch"].get("workspace_bytes"))),
                        bench["launch"])]
            inc = req.get("incumbent")
            if inc is not None:
                entries.append((rt.kernel(inc["key"], inc.get("cubin"), inc["kernel"],
                                          int(inc["launch"]["dynamic_smem_bytes"]),
                                          workspace=bool(inc["launch"].get("workspace_bytes"))),
                                inc["launch"]))
            result["bench"] = rt.benchmark(entries, tuple(bench["shape"]), bench["seed"],
                                           bench["runs"], bench["target_run_ms"],
                                           bench["max_reps"], bench["warmup"])
        return result
    raise ValueError(f"unknown op {op!r}")


def serve(inp: IO[bytes], out: IO[bytes]) -> int:
    """Answer requests until the parent closes the pipe."""
    if cuda is None:
        send(out, {"status": "unavailable", "error": f"pycuda cannot be imported: {_IMPORT_ERROR}"})
        return 0
    try:
        rt = Runtime()
    except Exception as exc:  # no device, driver mismatch, …
        send(out, {"status": "unavailable", "error": f"no usable CUDA device: {exc}"})
        return 0
    send(out, {"status": "ready", "info": rt.info(), "pid": os.getpid()})
    while True:
        try:
            req = recv(inp)
        except EOFError:
            return 0
        try:
            send(out, handle(rt, req))
        except KernelFault as exc:
            send(out, {"status": "crashed", "error": str(exc)[:400]})
            return 3  # the context is gone: the parent starts a fresh child
        except cuda.Error as exc:  # a fault reported by a later call: the context is gone too
            send(out, {"status": "crashed", "error": f"{type(exc).__name__}: {exc}"[:400]})
            return 3
        except Exception as exc:
            send(out, {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:400],
                       "traceback": traceback.format_exc()[-2000:]})


def main() -> int:
    """Entry point: protocol on the original stdout, anything printed goes to stderr."""
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin.buffer, proto_out)


if __name__ == "__main__":
    sys.exit(main())
