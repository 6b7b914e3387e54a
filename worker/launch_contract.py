"""The launch contract on the GPU side, built from a family's resolved signature: one module for
the evaluation child, the sanitizer's launcher and Nsight Compute's launcher.

numpy + pycuda (imported where a device is touched) + the standard library: no other tuneforge
import, so every launcher stays lean. What it takes is plain JSON made by the parent:

- a resolved signature (``kernels.family.Signature.resolve``): ``{"buffers": [{name, dtype,
  role, count}], "scalars": [{name, dtype, value}]}``;
- a launch (``kernels.base.LaunchConfig.to_dict``): grid, block, dynamic shared memory,
  ``workspace_bytes``, a ``cluster_size`` where the kernel's cluster is non-portable,
  ``persistent`` where grid x is cut to the CTAs resident at once (:func:`grid`; a whole
  number of the launch's ``group``, CTAs that wait for each other), and an
  optional ``prologue`` and ``epilogue`` whose ``args`` name signature buffers or scalars,
  ``"workspace"``, or are integer literals;
- fills (``kernels.family.Distribution.resolve``): one ``{"kind", "scale"}`` per input buffer.

The contract (``kernels.family``'s module doc): a candidate takes the buffers in order, then
the scalars, then the workspace pointer when its launch has one; the reference kernel, in the
``contract`` style, takes the input buffers in order, then a float64 ``ref`` and a float64
``scale`` for each output buffer, then the scalars; in the ``same_signature`` style it takes the
candidate's arguments, each output being its float64 ``ref`` (outputs dtype float64) or the
output buffer itself, widened into ``ref`` afterwards (float32). A rule (``{"kind", "atol"}``,
:data:`RULES`) says how :func:`judge` reads the statistics. Output buffers (role ``out``)
are poisoned with :data:`POISON` before a checked launch; ``inout`` buffers are filled like
inputs (the kernel reads them) and checked like outputs, without the unwritten-element check a
poison gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: The poison pattern (``worker/support.cu``'s ``TF_POISON``): a quiet NaN with a payload no
#: arithmetic produces. An output element still holding it after a launch was never written.
POISON = 0x7FC0DEAD
#: Threads a CTA of the support kernels (``tf_fill``, ``tf_poison``, ``tf_flush``, ``tf_check``)
FILL_THREADS = 256
#: ``tf_fill``'s codes of the fill kinds (``kernels.family.FILL_KINDS``).
FILL_CODES = {"normal": 0, "uniform": 1, "mixed": 2, "symmetric": 3, "normal_neg_inf": 4,
              "constant": 5}
#: Bytes and pycuda argument code of each element type (``kernels.family.DTYPES``; a test keeps
#: the two tables equal).
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (4, "f"), "float64": (8, "d"), "int32": (4, "i"), "int64": (8, "q"),
    "uint32": (4, "I"), "uint64": (8, "Q"),
}
NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32,
                "int64": np.int64, "uint32": np.uint32, "uint64": np.uint64}
#: The name a prologue's or epilogue's ``args`` give the workspace.
WORKSPACE = "workspace"
#: Correctness rules :func:`judge` applies (``kernels.family.RULES``).
RULES = ("scaled", "norm", "abs_rel", "exact")
#: How a reference kernel is called (``kernels.family.REFERENCE_STYLES``).
REFERENCE_STYLES = ("contract", "same_signature")

Signature = Mapping[str, Any]
Launch = Mapping[str, Any]


def fill_grid(n: int, sm_count: int) -> tuple[int, int, int]:
    """The grid the support kernels' grid-stride loops run ``n`` elements on: a thread an
    element up to 16 CTAs an SM (the evaluation child and the vendor harness alike)."""
    return (max(1, min(-(-n // FILL_THREADS), sm_count * 16)), 1, 1)


def flush_elements(l2_bytes: int) -> int:
    """Floats ``tf_flush`` rewrites before each timed launch: four times the L2, 64 MiB at
    least."""
    return max(l2_bytes * 4, 64 << 20) // 4


def sub_seed(seed: int, index: int) -> int:
    """The seed of input buffer ``index`` of a case seeded ``seed`` (64-bit)."""
    return (seed * 0x9E3779B1 + index * 0x632BE5AB) & 0xFFFFFFFFFFFFFFFF


def inputs(signature: Signature) -> list[Mapping[str, Any]]:
    """Buffers the kernel reads (``in`` and ``inout``), in order."""
    return [b for b in signature["buffers"] if b["role"] in ("in", "inout")]


def outputs(signature: Signature) -> list[Mapping[str, Any]]:
    """Buffers the kernel writes and the check reads (``out`` and ``inout``), in order."""
    return [b for b in signature["buffers"] if b["role"] in ("out", "inout")]


def ref_name(buffer: str) -> str:
    """Key of an output's float64 reference among the device buffers."""
    return f"{buffer}.ref"


def scale_name(buffer: str) -> str:
    """Key of an output's float64 per-element scale among the device buffers."""
    return f"{buffer}.scale"


def shape_key(signature: Signature) -> tuple[tuple[str, str, int], ...]:
    """What decides the device buffers of a shape: every buffer's name, dtype and count."""
    return tuple((b["name"], b["dtype"], int(b["count"])) for b in signature["buffers"])


def buffer_bytes(signature: Signature, *, reference: bool = True) -> int:
    """Device bytes of a shape's buffers (with each output's float64 reference and scale)."""
    total = sum(int(b["count"]) * DTYPES[b["dtype"]][0] for b in signature["buffers"])
    return total + (sum(16 * int(b["count"]) for b in outputs(signature)) if reference else 0)


# ---- argument formats and values ------------------------------------------------------------
def _scalar(signature: Signature, name: str) -> Mapping[str, Any] | None:
    return next((s for s in signature["scalars"] if s["name"] == name), None)


def _buffer(signature: Signature, name: str) -> Mapping[str, Any] | None:
    return next((b for b in signature["buffers"] if b["name"] == name), None)


def kernel_format(signature: Signature, workspace: bool = False) -> str:
    """pycuda format of a candidate: ``P`` per buffer, each scalar's code, ``P`` for the
    workspace (a GEMM: ``PPPPiii``, with a workspace ``PPPPiiiP``)."""
    return ("P" * len(signature["buffers"])
            + "".join(DTYPES[s["dtype"]][1] for s in signature["scalars"])
            + ("P" if workspace else ""))


def kernel_args(signature: Signature, bufs: Mapping[str, Any], workspace: Any = None
                ) -> tuple[Any, ...]:
    """A candidate's arguments in the order of :func:`kernel_format`."""
    args: list[Any] = [bufs[b["name"]] for b in signature["buffers"]]
    args += [s["value"] for s in signature["scalars"]]
    if workspace is not None:
        args.append(workspace)
    return tuple(args)


def aux_format(signature: Signature, args: Sequence[str | int]) -> str:
    """pycuda format of a prologue or epilogue kernel whose arguments are ``args`` (a GEMM's
    split-K reduction ``(workspace, bias, C, M, N, splits)``: ``PPPiii``)."""
    out = []
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            out.append("i")
        elif arg == WORKSPACE or _buffer(signature, str(arg)) is not None:
            out.append("P")
        elif (sc := _scalar(signature, str(arg))) is not None:
            out.append(DTYPES[sc["dtype"]][1])
        else:
            raise ValueError(f"prologue/epilogue argument {arg!r} is not a buffer, a scalar, "
                             f"{WORKSPACE!r} or an integer")
    return "".join(out)


def aux_args(signature: Signature, args: Sequence[str | int], bufs: Mapping[str, Any],
             workspace: Any) -> tuple[Any, ...]:
    """A prologue's or epilogue's argument values, in the order its launch names them."""
    out: list[Any] = []
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            out.append(int(arg))
        elif arg == WORKSPACE:
            if workspace is None:
                raise ValueError("a prologue or epilogue takes the workspace, but the launch has "
                                 "none")
            out.append(workspace)
        elif _buffer(signature, str(arg)) is not None:
            out.append(bufs[str(arg)])
        elif (sc := _scalar(signature, str(arg))) is not None:
            out.append(sc["value"])
        else:
            raise ValueError(f"prologue/epilogue argument {arg!r} is not a buffer, a scalar, "
                             f"{WORKSPACE!r} or an integer")
    return tuple(out)


def reference_format(signature: Signature, style: str = "contract") -> str:
    """pycuda format of the reference kernel: ``contract``: ``P`` per input, ``PP`` per output
    (ref, scale), each scalar's code (a GEMM: ``PPPPPiii``); ``same_signature``: the
    candidate's (:func:`kernel_format` without a workspace)."""
    if style == "same_signature":
        return kernel_format(signature)
    if style != "contract":
        raise ValueError(f"reference style {style!r}; known: {', '.join(REFERENCE_STYLES)}")
    return ("P" * len(inputs(signature)) + "PP" * len(outputs(signature))
            + "".join(DTYPES[s["dtype"]][1] for s in signature["scalars"]))


def reference_args(signature: Signature, bufs: Mapping[str, Any], style: str = "contract",
                   outputs_dtype: str = "float64") -> tuple[Any, ...]:
    """The reference kernel's arguments in the order of :func:`reference_format`
    (``same_signature``: each output's float64 ``ref`` for ``outputs_dtype`` float64, the
    output buffer itself for float32)."""
    if style == "same_signature":
        if any(b["role"] == "inout" for b in signature["buffers"]):
            raise ValueError("a same-signature reference cannot take inout buffers")
        wide = outputs_dtype == "float64"
        same: list[Any] = [bufs[ref_name(b["name"])] if b["role"] == "out" and wide
                           else bufs[b["name"]] for b in signature["buffers"]]
        return tuple(same + [s["value"] for s in signature["scalars"]])
    args: list[Any] = [bufs[b["name"]] for b in inputs(signature)]
    for b in outputs(signature):
        args += [bufs[ref_name(b["name"])], bufs[scale_name(b["name"])]]
    args += [s["value"] for s in signature["scalars"]]
    return tuple(args)


def scale_terms(rule: Mapping[str, Any] | None, tol: float) -> tuple[float, float]:
    """``(weight, offset)`` of the scale ``weight·|ref| + offset`` the GPU side writes for a
    rule other than ``scaled`` (whose scale the reference writes): ``abs_rel``: ``(1,
    atol/tol)``, so that ``err / scale <= tol`` is ``err <= atol + tol·|ref|``; ``norm`` and
    ``exact``: ``(0, 1)``."""
    kind = (rule or {}).get("kind", "scaled")
    if kind == "abs_rel":
        return 1.0, float((rule or {}).get("atol") or 0.0) / tol
    return 0.0, 1.0


def enqueue(fn: Any, aux: Callable[[str, str], Any], launch: Launch,
            signature: Signature, bufs: Mapping[str, Any], workspace: Any, stream: Any
            ) -> None:
    """Enqueue one launch of a candidate on ``stream``: its prologue when it has one, its
    kernel, its epilogue when it has one (``aux(name, format)`` gives the prepared function of
    a prologue or epilogue). ``workspace`` must be sized for the launch's ``workspace_bytes``
    (None when it has none)."""
    ws = workspace if int(launch.get("workspace_bytes") or 0) else None
    enqueue_aux(aux, launch.get("prologue"), signature, bufs, ws, stream)
    fn.prepared_async_call(grid(fn, launch), tuple(launch["block"]), stream,
                           *kernel_args(signature, bufs, ws),
                           shared_size=int(launch["dynamic_smem_bytes"]))
    enqueue_aux(aux, launch.get("epilogue"), signature, bufs, ws, stream)


#: most launches one sustained run makes
MAX_SUSTAINED_LAUNCHES = 1_000_000


def sustained_count(min_ms: float, per_launch_us: float) -> int:
    """Launches that last at least ``min_ms`` at ``per_launch_us`` each (at least 2)."""
    return int(min(MAX_SUSTAINED_LAUNCHES,
                   math.ceil(min_ms * 1000.0 / max(per_launch_us, 1e-3)) + 1))


def sustained_again(count: int, total_ms: float, min_ms: float) -> int | None:
    """After a sustained run of ``count`` launches lasting ``total_ms``: the count of a run
    again at its measured rate, 5 % long, when it fell short of ``min_ms`` (the estimate that
    sized it, from a few launches, ran slower than back-to-back launches do), else None."""
    if total_ms >= min_ms or count >= MAX_SUSTAINED_LAUNCHES:
        return None
    return max(count + 1, sustained_count(1.05 * min_ms, total_ms * 1000.0 / count))


def run_until(min_ms: float, count: int, run: Callable[[int], float]) -> tuple[int, float]:
    """``run(count)`` (back-to-back units, milliseconds between two events), made again at its
    own rate until it lasts ``min_ms`` (:func:`sustained_again`): the last count and its
    milliseconds."""
    again: int | None = count
    total_ms = 0.0
    while again is not None:
        count = again
        total_ms = run(count)
        again = sustained_again(count, total_ms, min_ms)
    return count, total_ms


#: a CUDA graph of back-to-back launches spans about this long (ms) ...
GRAPH_SPAN_MS = 20.0
#: ... and holds at most this many launches
GRAPH_MAX_CALLS = 2000


def graph_calls(per_launch_us: float, most: int = GRAPH_MAX_CALLS) -> int:
    """Launches one CUDA graph of a sustained run holds: about :data:`GRAPH_SPAN_MS` of them at
    ``per_launch_us``, at least 1 and at most ``most``."""
    return max(1, min(most, math.ceil(GRAPH_SPAN_MS * 1000.0 / max(per_launch_us, 1.0))))


def graph_replays(min_ms: float, calls: int, per_launch_us: float) -> int:
    """Replays of a graph of ``calls`` launches at ``per_launch_us`` that last ``min_ms``."""
    return max(1, math.ceil(min_ms * 1000.0 / (calls * max(per_launch_us, 1e-3))))


class LaunchGraph:
    """A CUDA graph captured from what ``enqueue`` puts on ``stream`` (a pycuda stream), called
    ``calls`` times, then instantiated; :meth:`replay` launches it on that stream. libcuda
    through ctypes (``cuStreamBeginCapture_v2`` in thread-local mode, ``cuStreamEndCapture``,
    ``cuGraphInstantiateWithFlags``, ``cuGraphLaunch``): pycuda does not wrap graphs. A capture
    that fails is ended, so the stream is left as it was; :meth:`close` frees the graph."""

    def __init__(self, stream: Any, enqueue: Callable[[], None], calls: int) -> None:
        import ctypes

        self._ctypes = ctypes
        lib = self._lib = _driver()
        for name in ("cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                     "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"):
            getattr(lib, name).restype = ctypes.c_int
        self.stream = stream
        self._handle = ctypes.c_void_p(int(stream.handle))
        self.graph, self.exec = ctypes.c_void_p(), ctypes.c_void_p()
        self._ok(lib.cuStreamBeginCapture_v2(self._handle, ctypes.c_int(1)),
                 "cuStreamBeginCapture")
        try:
            try:
                for _ in range(calls):
                    enqueue()
            finally:  # ends the capture whatever happened inside it
                ended = lib.cuStreamEndCapture(self._handle, ctypes.byref(self.graph))
            self._ok(ended, "cuStreamEndCapture")
            self._ok(lib.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), self.graph,
                                                     ctypes.c_ulonglong(0)),
                     "cuGraphInstantiateWithFlags")
        except BaseException:
            self.close()
            raise
        self.calls = calls

    @staticmethod
    def _ok(result: int, call: str) -> None:
        if result != 0:
            raise RuntimeError(f"{call} failed with CUresult {result}")

    def replay(self) -> None:
        """Enqueue the whole graph once on its stream."""
        self._ok(self._lib.cuGraphLaunch(self.exec, self._handle), "cuGraphLaunch")

    def close(self) -> None:
        """Free the executable graph and the graph (once)."""
        if self.exec.value:
            self._lib.cuGraphExecDestroy(self.exec)
            self.exec = self._ctypes.c_void_p()
        if self.graph.value:
            self._lib.cuGraphDestroy(self.graph)
            self.graph = self._ctypes.c_void_p()


#: ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`` (cuda.h), which pycuda's
#: ``function_attribute`` does not name (an enum value built from the number works)
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
#: cuda.h's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``,
#: ``CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH`` and ``CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT``
_MAX_DYNAMIC_SMEM, _CLUSTER_WIDTH, _SM_COUNT = 8, 11, 16


def configure(cuda: Any, fn: Any, launch: Launch, cubin: bytes | None = None) -> None:
    """Set on ``fn`` what ``launch`` needs before its first launch: dynamic shared memory over
    the default 48 KB, and a non-portable cluster size (a launch names ``cluster_size`` only
    then: ``kernels.base.LaunchConfig``). A ``persistent`` launch also needs the module's
    ``cubin``: the CTAs resident at once (:func:`resident_ctas`) are kept on ``fn`` for
    :func:`grid`, once for each block and shared-memory size."""
    smem = int(launch.get("dynamic_smem_bytes") or 0)
    if smem > 48 * 1024:
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    if int(launch.get("cluster_size") or 1) > 1:
        fn.set_attribute(cuda.function_attribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED), 1)
    if launch.get("persistent"):
        key = (tuple(launch["block"]), smem)
        resident = getattr(fn, "_tf_resident", None)
        if resident is None:
            resident = fn._tf_resident = {}
        if key not in resident:
            if cubin is None:
                raise ValueError("a persistent launch needs the module's cubin to count the "
                                 "CTAs resident at once")
            resident[key] = resident_ctas(cubin, str(launch["kernel_name"]), launch)


class LaunchRefused(ValueError):
    """A launch this GPU cannot run as asked (a group of CTAs that wait for each other but
    cannot all be resident at once): the candidate's ``launch_error``, the context intact."""


def grid(fn: Any, launch: Launch) -> tuple[int, int, int]:
    """The grid ``fn`` is launched on: ``launch``'s, with x cut to the CTAs resident at once
    where the launch is ``persistent`` (:func:`configure` counted them), a whole number of its
    ``group``. A group that cannot be resident at once is an error (its CTAs would wait for
    each other forever)."""
    x, y, z = (int(v) for v in launch["grid"])
    if launch.get("persistent"):
        key = (tuple(launch["block"]), int(launch.get("dynamic_smem_bytes") or 0))
        resident = fn._tf_resident[key]
        group = int(launch.get("group") or 1)
        if group > resident:
            raise LaunchRefused(f"a group of {group} CTAs that wait for each other does not fit "
                             f"the {resident} CTAs of this block and shared memory resident at "
                             "once on this GPU")
        x = min(x, resident - resident % group)
    return x, y, z


def _driver() -> Any:
    """libcuda through ctypes, for the occupancy calls pycuda does not wrap."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuModuleLoadData", "cuModuleGetFunction", "cuModuleUnload",
                 "cuFuncSetAttribute", "cuFuncGetAttribute", "cuCtxGetDevice",
                 "cuDeviceGetAttribute", "cuOccupancyMaxActiveClusters",
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def resident_ctas(cubin: bytes, name: str, launch: Launch) -> int:
    """CTAs of kernel ``name`` (in ``cubin``) that are resident at once on the current
    context's device at ``launch``'s block and dynamic shared memory: the clusters that fit
    (``cuOccupancyMaxActiveClusters``, which knows how the SMs group into GPCs) times the
    cluster's CTAs, or the CTAs an SM times the SMs. At least one cluster (or CTA)."""
    import ctypes

    lib = _driver()

    def ok(result: int, call: str) -> None:
        if result != 0:
            raise RuntimeError(f"{call} failed with CUresult {result} (kernel {name})")

    class LaunchConfigC(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                    ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                    ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]

    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    image = ctypes.create_string_buffer(cubin, len(cubin))
    ok(lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    try:
        ok(lib.cuModuleGetFunction(ctypes.byref(func), module, name.encode()),
           "cuModuleGetFunction")
        smem = int(launch.get("dynamic_smem_bytes") or 0)
        if smem > 48 * 1024:
            ok(lib.cuFuncSetAttribute(func, _MAX_DYNAMIC_SMEM, smem), "cuFuncSetAttribute")
        if int(launch.get("cluster_size") or 1) > 1:
            ok(lib.cuFuncSetAttribute(func, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
               "cuFuncSetAttribute")
        width = ctypes.c_int()
        ok(lib.cuFuncGetAttribute(ctypes.byref(width), _CLUSTER_WIDTH, func),
           "cuFuncGetAttribute")
        block = [int(v) for v in launch["block"]]
        count = ctypes.c_int()
        if width.value > 1:
            config = LaunchConfigC((ctypes.c_uint * 3)(*(int(v) for v in launch["grid"])),
                                   (ctypes.c_uint * 3)(*block), smem, None, None, 0)
            ok(lib.cuOccupancyMaxActiveClusters(ctypes.byref(count), func,
                                                ctypes.byref(config)),
               "cuOccupancyMaxActiveClusters")
            return max(1, count.value) * width.value
        ok(lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(count), func, block[0] * block[1] * block[2], ctypes.c_size_t(smem)),
           "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        device, sms = ctypes.c_int(), ctypes.c_int()
        ok(lib.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
        ok(lib.cuDeviceGetAttribute(ctypes.byref(sms), _SM_COUNT, device),
           "cuDeviceGetAttribute")
        return max(1, count.value * sms.value)
    finally:
        lib.cuModuleUnload(module)


def module_aux(module: Any) -> Callable[[str, str], Any]:
    """``aux(name, format)`` for :func:`enqueue`: the prologue or epilogue kernel ``name`` of
    ``module``, prepared with ``format``."""
    def aux(name: str, fmt: str) -> Any:
        found = module.get_function(name)
        found.prepare(fmt)
        return found
    return aux


def enqueue_aux(aux: Callable[[str, str], Any], step: Mapping[str, Any] | None,
                signature: Signature, bufs: Mapping[str, Any], workspace: Any, stream: Any
                ) -> None:
    """Enqueue a launch's prologue or epilogue ``step`` (nothing when it is None)."""
    if not step:
        return
    args = list(step["args"])
    aux(step["kernel_name"], aux_format(signature, args)).prepared_async_call(
        tuple(step["grid"]), tuple(step["block"]), stream,
        *aux_args(signature, args, bufs, workspace))


def check_fills(signature: Signature, fills: Sequence[Mapping[str, Any]]) -> None:
    """``ValueError`` unless there is one known fill per input and every buffer the device
    fills or checks is float32 (what ``tf_fill``, ``tf_poison`` and ``tf_check`` handle)."""
    ins = inputs(signature)
    if len(fills) != len(ins):
        raise ValueError(f"{len(fills)} fills for {len(ins)} input buffers")
    for fill in fills:
        if fill["kind"] not in FILL_CODES:
            raise ValueError(f"unknown fill kind {fill['kind']!r}; known: {', '.join(FILL_CODES)}")
    for b in [*ins, *outputs(signature)]:
        if b["dtype"] != "float32":
            raise ValueError(f"buffer {b['name']} is {b['dtype']}: the device fill and check "
                             "handle float32 buffers only")


# ---- host side: inputs, statistics, verdict --------------------------------------------------
def host_inputs(signature: Signature, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Normal(0, 1) host arrays for the input buffers, drawn in order from ``rng`` (never
    zeros: what the sanitizer's and Nsight's launchers run)."""
    out: dict[str, np.ndarray] = {}
    for b in inputs(signature):
        count = int(b["count"])
        if b["dtype"] == "float32":
            out[b["name"]] = rng.standard_normal(count, dtype=np.float32)
        elif b["dtype"] == "float64":
            out[b["name"]] = rng.standard_normal(count)
        else:
            out[b["name"]] = rng.integers(0, 64, count).astype(NUMPY_DTYPES[b["dtype"]])
    return out


def host_stats(out: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> dict[str, Any]:
    """The statistics of the ``tf_check`` kernel computed with numpy (CPU tests, cross-checks,
    the sanitizer's launcher)."""
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


def merge_stats(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The statistics of several outputs as one (sums added, maxima taken): what ``tf_check``
    accumulates when it runs once per output buffer."""
    return {"sum_err2": sum(p["sum_err2"] for p in parts),
            "sum_ref2": sum(p["sum_ref2"] for p in parts),
            "max_abs": max((p["max_abs"] for p in parts), default=0.0),
            "max_scaled": max((p["max_scaled"] for p in parts), default=0.0),
            "nonfinite": sum(p["nonfinite"] for p in parts),
            "unwritten": sum(p["unwritten"] for p in parts)}


def judge(sum_err2: float, sum_ref2: float, max_abs: float, max_scaled: float,
          nonfinite: int, unwritten: int, tol: float, rule: Mapping[str, Any] | None = None,
          reference_bad: int = 0) -> dict[str, Any]:
    """The pass rule of one case from its error statistics; ``rule`` None is ``scaled``.

    Every rule needs every element written and finite (and, ``reference_bad``, a reference
    without NaN, Inf or unwritten elements). ``scaled``
    (docs/ARCHITECTURE.md#the-evaluation-protocol) adds a global bound
    (norm-relative error) and a local one (each element's error over the reference's scale of
    it, ``Σ|a·b| + |bias|`` for a GEMM, which a wrong tail element cannot hide behind), both
    within ``tol``: no relative-only rule, which near zero after ReLU rejects correct kernels
    (the seed's first bug). ``norm``: the norm-relative error within ``tol``. ``abs_rel``: each
    element's error over ``|ref| + atol/tol`` within ``tol`` (:func:`scale_terms`).
    ``exact``: no element differs.
    """
    rel = math.sqrt(sum_err2 / sum_ref2) if sum_ref2 > 0 else (0.0 if sum_err2 == 0 else math.inf)
    reasons = []
    if unwritten:
        reasons.append(f"{unwritten} output element(s) never written")
    if nonfinite:
        reasons.append(f"{nonfinite} output element(s) NaN or Inf")
    if reference_bad:
        reasons.append(f"{reference_bad} reference element(s) NaN, Inf or never written: the "
                       "reference kernel is wrong")
    reasons += figure_reasons(rel, max_abs, max_scaled, tol, rule)
    return {"rel_err": rel, "max_abs_err": max_abs, "max_scaled_err": max_scaled,
            "nonfinite": nonfinite, "unwritten": unwritten,
            "passed": not reasons, "reason": "; ".join(reasons) or None}


#: How each reason :func:`figure_reasons` gives begins: what a re-judgement recomputes.
FIGURE_REASONS = ("norm-relative error ", "element error / reference scale ",
                  "an element's error exceeds ", "an element differs from the reference ")


def figure_reasons(rel: float, max_abs: float, max_scaled: float, tol: float,
                   rule: Mapping[str, Any] | None = None) -> list[str]:
    """Why a case's error figures fail ``rule`` (None is ``scaled``) at ``tol``: the part of
    :func:`judge` that depends on the tolerance (empty: the figures pass)."""
    kind = (rule or {}).get("kind", "scaled")
    if kind not in RULES:
        raise ValueError(f"correctness rule {kind!r}; known: {', '.join(RULES)}")
    reasons = []
    if kind in ("scaled", "norm") and not rel <= tol:
        reasons.append(f"norm-relative error {rel:.3g} > {tol:g}")
    if kind == "scaled" and not max_scaled <= tol:
        reasons.append(f"element error / reference scale {max_scaled:.3g} > {tol:g}")
    if kind == "abs_rel" and not max_scaled <= tol:
        atol = float((rule or {}).get("atol") or 0.0)
        reasons.append(f"an element's error exceeds {atol:g} + {tol:g}·|ref| (error over "
                       f"|ref| + atol/tol: {max_scaled:.3g} > {tol:g})")
    if kind == "exact" and not max_abs == 0:
        reasons.append(f"an element differs from the reference by {max_abs:.3g} (rule exact)")
    return reasons


def rejudge(case: Mapping[str, Any], tol: float, rule: Mapping[str, Any] | None = None
            ) -> dict[str, Any] | None:
    """A recorded case judged again at ``tol`` from its error figures: the reasons that do
    not depend on them (unwritten, NaN or Inf elements, a wrong reference) stay as recorded,
    those of the figures are recomputed. None when the case lacks a figure, or failed without
    saying why."""
    figures = [case.get(k) for k in ("rel_err", "max_abs_err", "max_scaled_err")]
    if any(f is None for f in figures):
        return None
    if not case.get("passed", True) and not case.get("reason"):
        return None  # failed, and the record does not say why
    rel, max_abs, max_scaled = (float(f) for f in figures if f is not None)
    kept = [r for r in str(case.get("reason") or "").split("; ")
            if r and not r.startswith(FIGURE_REASONS)]
    reasons = kept + figure_reasons(rel, max_abs, max_scaled, tol, rule)
    return {**case, "passed": not reasons, "reason": "; ".join(reasons) or None}


# ---- device side (pycuda) --------------------------------------------------------------------
def allocate(cuda: Any, signature: Signature, *, reference: bool = True) -> dict[str, Any]:
    """Device buffers of a shape by name (with ``NAME.ref`` and ``NAME.scale``, float64, for
    each output when ``reference``)."""
    bufs: dict[str, Any] = {}
    for b in signature["buffers"]:
        bufs[b["name"]] = cuda.mem_alloc(max(1, int(b["count"])) * DTYPES[b["dtype"]][0])
    if reference:
        for b in outputs(signature):
            count = max(1, int(b["count"]))
            bufs[ref_name(b["name"])] = cuda.mem_alloc(8 * count)
            bufs[scale_name(b["name"])] = cuda.mem_alloc(8 * count)
    return bufs


def upload_inputs(cuda: Any, signature: Signature, bufs: Mapping[str, Any],
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Copy :func:`host_inputs` into the input buffers; the host arrays."""
    host = host_inputs(signature, rng)
    for name, array in host.items():
        cuda.memcpy_htod(bufs[name], array)
    return host


def poison_outputs(cuda: Any, signature: Signature, bufs: Mapping[str, Any]) -> None:
    """Fill every ``out`` buffer with :data:`POISON` (synchronously)."""
    for b in signature["buffers"]:
        if b["role"] == "out":
            words = int(b["count"]) * DTYPES[b["dtype"]][0] // 4
            cuda.memset_d32(bufs[b["name"]], POISON, max(1, words))


def free(bufs: Mapping[str, Any]) -> None:
    """Release device buffers."""
    for buf in bufs.values():
        buf.free()
