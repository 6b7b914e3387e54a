"""The long-lived GPU evaluation child: one process per GPU, numpy + pycuda + the standard library.

Spawned by :mod:`worker.gpu_runner` with ``CUDA_VISIBLE_DEVICES`` pinning one GPU. It speaks a
length-prefixed pickle protocol on stdin/stdout (requests are dicts with an ``op``), keeps its
CUDA context, buffers and loaded modules between requests, and never imports tuneforge's other
packages: it starts fast and runs on any GPU host.

Requests (plain data, built by ``worker/evaluate.py``; no family is named here):

- ``setup``: ``support_cubin``, ``reference_cubin``, ``reference_kernel``, optionally
  ``reference_style`` and ``reference_outputs_dtype`` (how the reference is called:
  :mod:`worker.launch_contract`; default ``contract``);
- ``evaluate``: ``candidate`` (``key``, ``cubin``, ``kernel``), ``tol``, ``stop_on_failure``,
  ``checks`` (each: ``shape`` values, ``dist``, ``seed``, the resolved ``signature``,
  ``fills``, ``launch``, ``reference_launch``, optionally the ``rule`` ``{"kind", "atol"}``,
  default ``scaled``), ``bench`` (``shape``, ``signature``,
  ``fills``, ``launch``, ``seed``, ``runs``, ``target_run_ms``, ``max_reps``, ``warmup``), an
  optional ``incumbent`` (``key``, ``cubin``, ``kernel``, ``launch``) timed interleaved, and a
  ``recheck`` (``seed``, ``dist``, ``fills``, ``reference_launch``, optionally ``rule``): after
  the timed launches, one more correctness case of the function that was timed, at the bench's
  shape and launch, in the buffers it was timed in (:meth:`Runtime.recheck`);
- ``sustain``: ``candidate``, ``shape``, ``launch``, ``signature``, ``fills``, ``seed``,
  ``min_ms`` and a ``tol`` and ``recheck`` like ``evaluate``'s: the rate of back-to-back
  launches (no flush) over at least ``min_ms``, the faster of a loop of launches and a CUDA
  graph of them replayed — the clock the GPU holds under load, which the flushed runs of
  ``evaluate`` (tens of ms) do not reach — then the same recheck;
- ``stats`` (the checker on given arrays), ``info``, ``ping``.

A kernel fault (illegal address, …) corrupts the CUDA context: the child answers
``{"status": "crashed"}`` and exits; the parent starts a new one. A kernel that never finishes is
killed from outside by the parent's watchdog.
"""

from __future__ import annotations

import math
import os
import pickle
import statistics
import struct
import sys
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from worker import launch_contract as lc
from worker.launch_contract import POISON, host_stats, judge

__all__ = ["POISON", "Runtime", "handle", "host_stats", "judge", "recv", "send", "serve"]

try:  # the parent reports a missing pycuda as the backend being unavailable
    import pycuda.driver as cuda
except ImportError as exc:  # pragma: no cover - depends on the host
    cuda = None
    _IMPORT_ERROR: str | None = repr(exc)
else:
    _IMPORT_ERROR = None

FILL_THREADS = lc.FILL_THREADS
#: Bytes copied device to device to measure the copy bandwidth at start-up (each way).
COPY_BYTES = 1 << 30
COPY_RUNS = 7


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


class KernelFault(Exception):
    """The CUDA context is no longer usable (illegal address, launch failure, …)."""


# ---- the runtime ----------------------------------------------------------------------------
class Runtime:
    """Loads cubins, owns buffers, launches, times; all on one device, for any family (the
    launch contract of :mod:`worker.launch_contract`)."""

    def __init__(self) -> None:
        assert cuda is not None
        cuda.init()
        self.device = cuda.Device(0)
        self.context = self.device.make_context()
        self.stream = cuda.Stream()
        self.modules: dict[str, Any] = {}
        self.buffers: dict[tuple[tuple[str, str, int], ...], dict[str, Any]] = {}
        self.support: Any = None
        self.reference_module: Any = None
        self.reference_kernel = ""
        self.reference_style = "contract"
        self.reference_outputs_dtype = "float64"
        self.reference_fns: dict[str, Any] = {}
        self.ref_bad: Any = None
        attrs = cuda.device_attribute
        self.l2_bytes = int(self.device.get_attribute(attrs.L2_CACHE_SIZE))
        self.flush_n = lc.flush_elements(self.l2_bytes)
        self.flush_buf = cuda.mem_alloc(self.flush_n * 4)
        self.stats = cuda.mem_alloc(4 * 8)
        self.counts = cuda.mem_alloc(2 * 8)
        self.events: list[tuple[Any, Any]] = []
        self.sm_count = int(self.device.get_attribute(attrs.MULTIPROCESSOR_COUNT))
        self.ws: Any = None
        self.ws_bytes = 0
        self.copy = self.measure_copy()

    # -- device ------------------------------------------------------------------------------
    def measure_copy(self, nbytes: int = COPY_BYTES, runs: int = COPY_RUNS) -> dict[str, Any]:
        """Device-to-device copy bandwidth (``cuMemcpyDtoD`` of ``nbytes``, CUDA events, median
        of ``runs`` after a warm-up): GB/s counting the bytes read and written (2 x nbytes)."""
        try:
            free, _ = cuda.mem_get_info()
            while nbytes > (64 << 20) and 2 * nbytes > free // 2:
                nbytes //= 2  # a small or busy GPU: copy less rather than fail
            src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
            try:
                cuda.memset_d32(src, 0x3F800000, nbytes // 4)
                start, end = cuda.Event(), cuda.Event()
                ms = []
                for i in range(runs + 1):
                    start.record(self.stream)
                    cuda.memcpy_dtod_async(dst, src, nbytes, self.stream)
                    end.record(self.stream)
                    end.synchronize()
                    if i:  # the first copy warms up
                        ms.append(end.time_since(start))
            finally:
                src.free()
                dst.free()
            return {"copy_gbs": round(2 * nbytes / (statistics.median(ms) * 1e-3) / 1e9, 1),
                    "copy_bytes": nbytes, "copy_runs": runs}
        except cuda.Error as exc:
            return {"copy_gbs": None, "copy_error": f"{type(exc).__name__}: {exc}"[:200]}

    def info(self) -> dict[str, Any]:
        """Name, limits, clocks and the measured copy bandwidth of the device."""
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
            **self.copy,
        }

    def setup(self, support_cubin: bytes, reference_cubin: bytes, reference_kernel: str,
              reference_style: str = "contract", reference_outputs_dtype: str = "float64"
              ) -> None:
        """Load the support kernels and the family's float64 reference (called in
        ``reference_style``, its outputs in ``reference_outputs_dtype``)."""
        self.support = cuda.module_from_buffer(support_cubin)
        self.fill = self.support.get_function("tf_fill")
        self.fill.prepare("PqQif")
        self.poison = self.support.get_function("tf_poison")
        self.poison.prepare("Pq")
        self.check = self.support.get_function("tf_check")
        self.check.prepare("PPPqPP")
        self.flush = self.support.get_function("tf_flush")
        self.flush.prepare("Pq")
        self.ref_scale = self.support.get_function("tf_ref_scale")
        self.ref_scale.prepare("PPPqiddP")
        if self.ref_bad is None:
            self.ref_bad = cuda.mem_alloc(8)
        if reference_style not in lc.REFERENCE_STYLES:
            raise ValueError(f"reference style {reference_style!r}; known: "
                             f"{', '.join(lc.REFERENCE_STYLES)}")
        self.reference_module = cuda.module_from_buffer(reference_cubin)
        self.reference_kernel = reference_kernel
        self.reference_style = reference_style
        self.reference_outputs_dtype = reference_outputs_dtype
        self.reference_fns = {}

    def reference(self, fmt: str) -> Any:
        """The reference kernel prepared with ``fmt`` (the signature's reference format)."""
        fn = self.reference_fns.get(fmt)
        if fn is None:
            fn = self.reference_module.get_function(self.reference_kernel)
            fn.prepare(fmt)
            self.reference_fns[fmt] = fn
        return fn

    def kernel(self, key: str, cubin: bytes | None, name: str, launch: dict[str, Any],
               fmt: str) -> Any:
        """The loaded function for ``key`` (loading ``cubin`` the first time), prepared with
        the pycuda format ``fmt`` (:func:`worker.launch_contract.kernel_format`) and configured
        for ``launch`` (:func:`worker.launch_contract.configure`)."""
        fn = self.modules.get(key)
        if fn is None:
            if cubin is None:
                raise KeyError(f"kernel {key} is not loaded and no cubin was sent")
            if len(self.modules) > 64:
                self.modules.clear()
            module = cuda.module_from_buffer(cubin)
            fn = module.get_function(name)
            fn._tf_module = module  # keep the module alive with the function
            fn._tf_cubin = cubin  # a persistent launch counts its resident CTAs from it
            fn._tf_aux = {}
            fn._tf_format = None
            self.modules[key] = fn
        if fn._tf_format != fmt:
            fn.prepare(fmt)
            fn._tf_format = fmt
        lc.configure(cuda, fn, launch, fn._tf_cubin)
        return fn

    def candidate(self, entry: dict[str, Any], launch: dict[str, Any],
                  signature: dict[str, Any]) -> Any:
        """The function of a request's candidate (or incumbent) for ``launch``."""
        fmt = lc.kernel_format(signature, bool(launch.get("workspace_bytes")))
        return self.kernel(entry["key"], entry.get("cubin"), entry["kernel"], launch, fmt)

    # -- buffers -------------------------------------------------------------------------------
    def bufs(self, signature: dict[str, Any]) -> dict[str, Any]:
        """Device buffers of a shape (the signature's, each output's reference and scale),
        reused across requests."""
        key = lc.shape_key(signature)
        found = self.buffers.get(key)
        if found is not None:
            return found
        if len(self.buffers) >= 8:  # keep memory bounded: drop the largest shapes first
            for old in sorted(self.buffers, key=lambda s: -sum(c for _, _, c in s)):
                lc.free(self.buffers.pop(old))
                if len(self.buffers) < 8:
                    break
        found = lc.allocate(cuda, signature)
        self.buffers[key] = found
        return found

    def _grid1d(self, n: int) -> tuple[int, int, int]:
        return lc.fill_grid(n, self.sm_count)

    def fill_inputs(self, signature: dict[str, Any], fills: list[dict[str, Any]], seed: int,
                    reference_launch: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fresh seeded inputs (one fill per input buffer, input ``i`` seeded
        :func:`~worker.launch_contract.sub_seed`) and, given its launch, their float64
        reference."""
        lc.check_fills(signature, fills)
        b = self.bufs(signature)
        for i, (buf, fill) in enumerate(zip(lc.inputs(signature), fills, strict=True)):
            count = int(buf["count"])
            self.fill.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                                          b[buf["name"]], count, lc.sub_seed(seed, i),
                                          lc.FILL_CODES[fill["kind"]], float(fill["scale"]))
        if reference_launch is not None:
            self.reference(lc.reference_format(signature)).prepared_async_call(
                tuple(reference_launch["grid"]), tuple(reference_launch["block"]), self.stream,
                *lc.reference_args(signature, b),
                shared_size=int(reference_launch.get("dynamic_smem_bytes") or 0))
        return b

    def same_signature_reference(self, signature: dict[str, Any], b: dict[str, Any],
                                 reference_launch: dict[str, Any]) -> None:
        """Enqueue a same-signature reference: its targets (each output's ``ref``, or the
        output buffer for float32) poisoned first, so that what it leaves unwritten shows."""
        wide = self.reference_outputs_dtype == "float64"
        for buf in lc.outputs(signature):
            target = b[lc.ref_name(buf["name"])] if wide else b[buf["name"]]
            words = int(buf["count"]) * (2 if wide else lc.DTYPES[buf["dtype"]][0] // 4)
            self.poison.prepared_async_call(self._grid1d(words), (FILL_THREADS, 1, 1),
                                            self.stream, target, words)
        self.reference(lc.reference_format(signature, "same_signature")).prepared_async_call(
            tuple(reference_launch["grid"]), tuple(reference_launch["block"]), self.stream,
            *lc.reference_args(signature, b, "same_signature", self.reference_outputs_dtype),
            shared_size=int(reference_launch.get("dynamic_smem_bytes") or 0))

    def rule_reference(self, signature: dict[str, Any], b: dict[str, Any],
                       rule: dict[str, Any], tol: float) -> None:
        """Enqueue what a rule other than ``scaled`` reads: each output's float64 ``ref``
        (widened from a float32 reference output) and its ``scale``
        (:func:`~worker.launch_contract.scale_terms`), counting bad reference elements."""
        weight, offset = lc.scale_terms(rule, tol)
        widen = (self.reference_style == "same_signature"
                 and self.reference_outputs_dtype == "float32")
        cuda.memset_d32_async(self.ref_bad, 0, 2, self.stream)
        for buf in lc.outputs(signature):
            count = int(buf["count"])
            ref = b[lc.ref_name(buf["name"])]
            self.ref_scale.prepared_async_call(
                self._grid1d(count), (FILL_THREADS, 1, 1), self.stream,
                b[buf["name"]] if widen else ref, ref, b[lc.scale_name(buf["name"])], count,
                int(widen), weight, offset, self.ref_bad)

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
    def aux(fn: Any, name: str, fmt: str) -> Any:
        """The prologue or epilogue kernel ``name`` of ``fn``'s module, prepared with ``fmt``
        (once)."""
        found = fn._tf_aux.get((name, fmt))
        if found is None:
            found = fn._tf_module.get_function(name)
            found.prepare(fmt)
            fn._tf_aux[(name, fmt)] = found
        return found

    def launch(self, fn: Any, launch: dict[str, Any], b: dict[str, Any],
               signature: dict[str, Any]) -> None:
        """Enqueue one launch of a candidate: its kernel and, when the launch has one, its
        epilogue right after it on the same stream. The workspace must have been sized
        beforehand (:meth:`workspace`), outside any timed region."""
        ws_bytes = int(launch.get("workspace_bytes") or 0)
        if ws_bytes > self.ws_bytes:
            raise ValueError(f"launch needs a {ws_bytes} B workspace; {self.ws_bytes} B sized")
        lc.enqueue(fn, lambda name, fmt: self.aux(fn, name, fmt), launch, signature, b,
                   self.ws if ws_bytes else None, self.stream)

    def sync(self) -> None:
        """Wait for the stream; a kernel fault becomes :class:`KernelFault`."""
        try:
            self.stream.synchronize()
        except cuda.Error as exc:
            raise KernelFault(str(exc)) from exc

    # -- correctness ---------------------------------------------------------------------------
    def check_case(self, fn: Any, case: dict[str, Any], tol: float,
                   run: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """One correctness case: fresh inputs, poisoned outputs, launch, on-GPU error stats
        (accumulated over the output buffers). ``run(buffers)``, given, enqueues what is checked
        in place of one launch of ``fn`` (a captured graph of its launches)."""
        signature, launch = case["signature"], case["launch"]
        rule = case.get("rule") or {"kind": "scaled"}
        if self.reference_style == "contract":
            b = self.fill_inputs(signature, case["fills"], case["seed"], case["reference_launch"])
        else:
            if rule.get("kind", "scaled") == "scaled":
                raise ValueError("the scaled rule needs a contract-style reference (it writes "
                                 "the scale)")
            b = self.fill_inputs(signature, case["fills"], case["seed"])
            self.same_signature_reference(signature, b, case["reference_launch"])
        if rule.get("kind", "scaled") != "scaled":
            self.rule_reference(signature, b, rule, tol)
        for buf in signature["buffers"]:
            if buf["role"] == "out":
                words = int(buf["count"]) * lc.DTYPES[buf["dtype"]][0] // 4
                self.poison.prepared_async_call(self._grid1d(words), (FILL_THREADS, 1, 1),
                                                self.stream, b[buf["name"]], words)
        ws_bytes = int(launch.get("workspace_bytes") or 0)
        if ws_bytes:  # poisoned too: a partial sum the kernel fails to write shows up as NaN
            ws = self.workspace(ws_bytes)
            self.poison.prepared_async_call(self._grid1d(ws_bytes // 4), (FILL_THREADS, 1, 1),
                                            self.stream, ws, ws_bytes // 4)
        cuda.memset_d32_async(self.stats, 0, 8, self.stream)
        cuda.memset_d32_async(self.counts, 0, 4, self.stream)
        self.sync()
        start = time.perf_counter()
        if run is None:
            self.launch(fn, launch, b, signature)
        else:
            run(b)
        self.sync()
        kernel_s = time.perf_counter() - start
        for buf in lc.outputs(signature):
            count = int(buf["count"])
            self.check.prepared_async_call(self._grid1d(count), (FILL_THREADS, 1, 1),
                                           self.stream, b[buf["name"]],
                                           b[lc.ref_name(buf["name"])],
                                           b[lc.scale_name(buf["name"])], count, self.stats,
                                           self.counts)
        self.sync()
        stats = np.empty(4, np.float64)
        counts = np.empty(2, np.uint64)
        cuda.memcpy_dtoh(stats, self.stats)
        cuda.memcpy_dtoh(counts, self.counts)
        ref_bad = np.zeros(1, np.uint64)
        if rule.get("kind", "scaled") != "scaled":
            cuda.memcpy_dtoh(ref_bad, self.ref_bad)
        verdict = judge(float(stats[0]), float(stats[1]), float(stats[2]), float(stats[3]),
                        int(counts[0]), int(counts[1]), tol, rule, int(ref_bad[0]))
        return {"shape": list(case["shape"]), "seed": case["seed"], "dist": case["dist"],
                **verdict, "kernel_seconds": round(kernel_s, 6)}

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
                      signature: dict[str, Any], reps: int, wait_each: bool = True
                      ) -> list[list[float]]:
        """Time ``reps`` launches of each function, interleaved, the ``out`` buffers poisoned
        and L2 flushed before each.

        One event pair encloses everything a launch enqueues (a split-K launch's kernel and its
        epilogue: the user pays for both); the poison and the flush run outside it. The poison
        makes every timed launch look like a checked one: a kernel that skips its work when
        its output already holds numbers (``if (y[0] == y[0]) return;``) works on every timed
        launch too. Each timed launch is waited for before the next one's poison and flush are
        enqueued, as the vendor harness (``worker.vendor.measure_torch``) times a call: a
        hundred launches enqueued ahead (``wait_each=False``, one wait at the end) read a
        20-50 us kernel 0.6-0.8 us slower (docs/GPU.md). Returns microseconds per launch, one
        list per function.
        """
        poisoned = [(b[buf["name"]], int(buf["count"]) * lc.DTYPES[buf["dtype"]][0] // 4)
                    for buf in signature["buffers"] if buf["role"] == "out"]
        events = self._events(reps * len(fns))
        slot = 0
        for _ in range(reps):
            for fn, launch in fns:
                for ptr, words in poisoned:  # before the flush, which evicts its lines
                    self.poison.prepared_async_call(self._grid1d(words), (FILL_THREADS, 1, 1),
                                                    self.stream, ptr, words)
                self.flush.prepared_async_call(self._grid1d(self.flush_n), (FILL_THREADS, 1, 1),
                                               self.stream, self.flush_buf, self.flush_n)
                start, end = events[slot]
                start.record(self.stream)
                self.launch(fn, launch, b, signature)
                end.record(self.stream)
                if wait_each:
                    self.sync()
                slot += 1
        if not wait_each:
            self.sync()
        out: list[list[float]] = [[] for _ in fns]
        for i in range(slot):
            start, end = events[i]
            out[i % len(fns)].append(end.time_since(start) * 1000.0)
        return out

    def benchmark(self, entries: list[tuple[Any, dict[str, Any]]], bench: dict[str, Any]
                  ) -> dict[str, Any]:
        """Warm-up, then ``runs`` runs of adaptive repetitions; each run is a median."""
        signature = bench["signature"]
        b = self.fill_inputs(signature, bench["fills"], bench["seed"])
        self.workspace(max(int(launch.get("workspace_bytes") or 0) for _, launch in entries))
        self.sync()
        first = self.time_launches(entries, b, signature, max(1, bench["warmup"]))
        slowest_us = max(max(t) for t in first)
        reps = int(max(1, min(bench["max_reps"],
                              math.ceil(bench["target_run_ms"] * 1000.0 / max(slowest_us, 1.0)
                                        / len(entries)))))
        per_fn_runs: list[list[float]] = [[] for _ in entries]
        samples: list[list[float]] = [[] for _ in entries]
        for _ in range(bench["runs"]):
            times = self.time_launches(entries, b, signature, reps)
            for i, series in enumerate(times):
                per_fn_runs[i].append(float(np.median(series)))
                samples[i].extend(series)
        return {"reps_per_run": reps, "warmup_us": first, "runs_us": per_fn_runs,
                "samples_us": samples}


    def sustain(self, fn: Any, req: dict[str, Any]) -> dict[str, Any]:
        """The rate of back-to-back launches, two ways, each for at least ``min_ms`` between
        two events: a loop of launches (after a warm-up and a short batch that sizes it; a run
        that fell short is made again at its own rate: :func:`worker.launch_contract.
        run_until`), then a CUDA graph of the same launches replayed
        (:class:`worker.launch_contract.LaunchGraph`: the GPU's rate without the host's
        per-launch cost), as the peers' harness times a peer. ``us_per_launch`` is the faster
        of the two (``way`` says which; ``launches`` and ``total_ms`` are its); ``loop`` and
        ``graph`` hold both, or ``graph_error`` why no graph could be captured. Given a
        ``recheck`` case, the graph timed is replayed once more on it, in the same buffers,
        and ``graph["recheck"]`` holds the verdict: a graph that lost a launch's prologue,
        kernel or epilogue reads faster, and fails here."""
        signature, launch = req["signature"], req["launch"]
        b = self.fill_inputs(signature, req["fills"], req["seed"])
        self.workspace(int(launch.get("workspace_bytes") or 0))

        def step() -> None:
            self.launch(fn, launch, b, signature)

        loop_of = self.back_to_back(step)
        for _ in range(3):
            step()
        self.sync()
        estimate_us = max(loop_of(5) * 1000.0 / 5, 1.0)
        min_ms = float(req["min_ms"])
        count, total_ms = lc.run_until(min_ms, lc.sustained_count(min_ms, estimate_us), loop_of)
        loop = {"launches": count, "total_ms": round(total_ms, 3),
                "us_per_launch": total_ms * 1000.0 / count}
        out: dict[str, Any] = {**loop, "way": "loop", "loop": loop}
        calls = lc.graph_calls(loop["us_per_launch"])
        try:
            captured = lc.LaunchGraph(self.stream, step, calls)
        except (RuntimeError, cuda.Error) as exc:  # the loop's rate stands; the reply says why
            out["graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
            return out

        def replay_on(got: dict[str, Any]) -> None:
            if got is not b:  # the graph holds b's pointers: a check elsewhere proves nothing
                raise RuntimeError("the check's buffers are not those the graph was captured on")
            captured.replay()

        try:  # a fault while replaying is a fault like any other: it is not caught here
            graph = self.replay_sustained(captured, min_ms, loop["us_per_launch"])
            if req.get("recheck") is not None:
                graph["recheck"] = self.recheck(fn, req, req["recheck"], float(req["tol"]),
                                                run=replay_on)
        finally:
            captured.close()
        out["graph"] = graph
        if graph["us_per_launch"] < loop["us_per_launch"]:
            out.update(launches=graph["launches"], total_ms=graph["total_ms"],
                       us_per_launch=graph["us_per_launch"], way="graph")
        return out

    def back_to_back(self, step: Callable[[], None]) -> Callable[[int], float]:
        """``run(count)``: ``step`` enqueued ``count`` times between two events on the stream,
        waited for; the milliseconds between the events."""
        start, end = self._events(1)[0]

        def run(count: int) -> float:
            start.record(self.stream)
            for _ in range(count):
                step()
            end.record(self.stream)
            self.sync()
            return float(end.time_since(start))
        return run

    def replay_sustained(self, graph: Any, min_ms: float, per_launch_us: float
                         ) -> dict[str, Any]:
        """``graph`` (a :class:`worker.launch_contract.LaunchGraph` on this runtime's stream)
        replayed back to back for at least ``min_ms`` (:func:`worker.launch_contract.
        run_until`): ``us_per_launch``, ``launches`` (all replays'), ``calls`` (one graph's),
        ``total_ms``."""
        graph.replay()  # the first replay uploads the graph; it is not timed
        self.sync()
        replays, total_ms = lc.run_until(min_ms, lc.graph_replays(min_ms, graph.calls,
                                                                  per_launch_us),
                                         self.back_to_back(graph.replay))
        return {"launches": replays * graph.calls, "calls": graph.calls,
                "total_ms": round(total_ms, 3),
                "us_per_launch": total_ms * 1000.0 / (replays * graph.calls)}

    def recheck(self, fn: Any, timed: dict[str, Any], recheck: dict[str, Any], tol: float,
                run: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """One more correctness case of ``fn`` after it was timed: fresh inputs (the recheck's
        seed), outputs poisoned again, ``timed``'s shape, signature and launch.

        ``fn`` is the very function object that was timed, so its module is not loaded again
        and whatever state the kernel keeps on the device (a ``__device__`` flag set on its
        first launch, the last input pointer it saw) is still there; the case runs in the
        buffers the timing used (:meth:`bufs` keeps them by shape), so a kernel that skips its
        work when it sees the same pointer again is caught by its unwritten outputs. ``run``:
        as in :meth:`check_case`.
        """
        case = {"shape": timed["shape"], "signature": timed["signature"],
                "launch": timed["launch"], "seed": recheck["seed"], "dist": recheck["dist"],
                "fills": recheck["fills"], "reference_launch": recheck["reference_launch"],
                "rule": recheck.get("rule")}
        return self.check_case(fn, case, tol, run)


# ---- request handling -----------------------------------------------------------------------
def handle(rt: Runtime, req: dict[str, Any]) -> dict[str, Any]:
    """Serve one request (the fields are in the module's docstring)."""
    op = req["op"]
    if op == "ping":
        return {"status": "ok"}
    if op == "info":
        return {"status": "ok", "info": rt.info()}
    if op == "setup":
        rt.setup(req["support_cubin"], req["reference_cubin"], req["reference_kernel"],
                 req.get("reference_style", "contract"),
                 req.get("reference_outputs_dtype", "float64"))
        return {"status": "ok", "info": rt.info()}
    if op == "stats":  # the on-GPU checker applied to given arrays (cross-check with numpy)
        return {"status": "ok", "stats": rt.stats_of(req["out"], req["ref"], req["scale"])}
    if op == "evaluate":
        cand = req["candidate"]
        cases: list[dict[str, Any]] = []
        fn0: Any = None
        try:
            for case in req["checks"]:
                fn = rt.candidate(cand, case["launch"], case["signature"])
                fn0 = fn0 or fn
                cases.append(rt.check_case(fn, case, req["tol"]))
                if not cases[-1]["passed"] and req.get("stop_on_failure", True):
                    break
        # launch refused (resources, or a group larger than what is resident at once): the
        # context survives
        except (cuda.LogicError, lc.LaunchRefused) as exc:
            return {"status": "launch_error", "error": str(exc)[:400], "cases": cases}
        result: dict[str, Any] = {"status": "ok", "cases": cases}
        if fn0 is not None:
            result["function"] = {"regs_per_thread": fn0.num_regs,
                                  "local_bytes": fn0.local_size_bytes,
                                  "static_smem_bytes": fn0.shared_size_bytes}
        if req.get("bench") and cases and all(c["passed"] for c in cases):
            bench = req["bench"]
            signature = bench["signature"]
            timed = rt.candidate(cand, bench["launch"], signature)
            entries = [(timed, bench["launch"])]
            inc = req.get("incumbent")
            if inc is not None:
                entries.append((rt.candidate(inc, inc["launch"], signature), inc["launch"]))
            result["bench"] = rt.benchmark(entries, bench)
            if req.get("recheck") is not None:  # the function object timed, never a reload
                result["recheck"] = rt.recheck(timed, bench, req["recheck"], req["tol"])
        return result
    if op == "sustain":
        fn = rt.candidate(req["candidate"], req["launch"], req["signature"])
        reply = {"status": "ok", "sustained": rt.sustain(fn, req)}
        if req.get("recheck") is not None:
            reply["recheck"] = rt.recheck(fn, req, req["recheck"], req["tol"])
        return reply
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
