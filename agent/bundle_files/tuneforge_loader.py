"""tuneforge_loader: call the kernels of an exported tuneforge library bundle from PyTorch.

This file is copied into every bundle (``tuneforge library export``) and imports only torch,
the CUDA driver bindings (``cuda.bindings.driver``, package ``cuda-bindings``) and the standard
library: it never imports tuneforge. ::

    import sys; sys.path.insert(0, "DIR")
    import tuneforge_loader
    lib = tuneforge_loader.load("DIR")     # or load() for the bundle this file sits in
    y = lib.softmax(x)                     # a family's input buffers in order, outputs returned

A call checks its inputs (dtype, contiguity, shape against the family's dimensions and bounds,
the buffers' sizes against each other, CUDA device of the bundle's arch) and raises
:class:`InputError` naming the argument, before anything runs. It then looks the shape up in
the dispatch table: an entry runs its tuned cubin on torch's current stream (prologue, kernel,
epilogue, workspace, as the entry's launch says); a shape with no entry runs the family's
fallback (its vendor operator, else its reference kernel, else an error) and says so once per
shape with a :class:`FallbackWarning`, also logged at INFO on the ``tuneforge_loader`` logger.
A GPU of the bundle's compute capability whose name is not the one the bundle was tuned on
(an H200 running an H100's library) runs it, and the first call there says so with a
:class:`DeviceWarning`. There, an entry that lists near-ties (points its GPU timed within a few
percent of the entry's) has them all timed on the first call's inputs, and the fastest runs
from then on: the entry's own point unless another is faster by more than :data:`TIE_MARGIN`.

Each family is a ``torch.library`` custom operator (``torch.ops.tuneforge_<id>.<family>``) with
a fake implementation, so a call inside ``torch.compile(fullgraph=True)`` is one graph node;
eager calls go to the same implementation without the operator's dispatch cost. The bundle's
format is documented in tuneforge's ``docs/LIBRARY.md``.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import logging
import math
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

FORMAT = "tuneforge-bundle"
VERSION = 1
LOG = logging.getLogger("tuneforge_loader")

TORCH_DTYPES: dict[str, Any] = {
    "float32": torch.float32, "float64": torch.float64, "int32": torch.int32,
    "int64": torch.int64, "uint32": getattr(torch, "uint32", None),
    "uint64": getattr(torch, "uint64", None),
}
C_TYPES: dict[str, Any] = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
}
#: the name a prologue's or epilogue's ``args`` give the workspace
WORKSPACE = "workspace"
#: dynamic shared memory a kernel may use without opting in
DEFAULT_SMEM_LIMIT = 48 * 1024
#: input shapes a kernel remembers as checked (then forgets them all and starts again)
MAX_KNOWN_SHAPES = 4096
#: on another GPU, a near-tie replaces the entry's point where it is this much faster
TIE_MARGIN = 0.01
#: timing the near-ties: rounds over all of them in turn, and the least GPU time a round of
#: one gives a point (back-to-back calls on the first call's inputs; the best round counts)
TIE_ROUNDS = 5
TIE_ROUND_US = 300.0


class InputError(ValueError):
    """An input the bundle's kernels cannot take; the message names the argument."""


class BundleError(ValueError):
    """A bundle folder that is not one this loader reads."""


class NoFallback(RuntimeError):
    """A shape with no dispatch entry in a bundle whose family has no fallback."""


class FallbackWarning(UserWarning):
    """A shape with no dispatch entry ran the family's fallback (once per shape)."""


class DeviceWarning(UserWarning):
    """The bundle's kernels run on a GPU of the bundle's compute capability but another name
    than the one they were tuned on: correct, though another point may be faster there (once
    per device)."""


# ---- the family's expressions (buffer sizes, scalars, a reference launch) ------------------
def _ceil_div(a: Any, b: Any) -> Any:
    return -(-a // b)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "ceil_div": _ceil_div, "int": int,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
}
_PARSED: dict[str, ast.expr] = {}


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """The value of one of the family's integer expressions (``"rows * cols"``) with ``env``
    bound: literals, names, arithmetic, comparisons, ``x if c else y`` and ``min``, ``max``,
    ``abs``, ``ceil_div``, ``int``, ``ceil``, ``floor``, ``log2``; nothing is handed to
    ``eval``, any other construct raises :class:`BundleError`."""
    tree = _PARSED.get(text)
    if tree is None:
        try:
            tree = ast.parse(str(text).strip(), mode="eval").body
        except SyntaxError as exc:
            raise BundleError(f"cannot parse expression {text!r}: {exc.msg}") from None
        _PARSED[text] = tree
    return _walk(tree, env, text)


def _walk(node: ast.expr, env: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise BundleError(f"expression {text!r}: unknown name {node.id!r}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_walk(node.left, env, text), _walk(node.right, env, text))
    if isinstance(node, ast.UnaryOp):
        value = _walk(node.operand, env, text)
        ops: dict[type, Callable[[Any], Any]] = {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v,
                                                 ast.Not: lambda v: not v, ast.Invert: lambda v: ~v}
        return ops[type(node.op)](value)
    if isinstance(node, ast.BoolOp):
        values = [_walk(v, env, text) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _walk(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _walk(comp, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _walk(node.body if _walk(node.test, env, text) else node.orelse, env, text)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS and not node.keywords):
        return _FUNCTIONS[node.func.id](*(_walk(a, env, text) for a in node.args))
    raise BundleError(f"expression {text!r}: {type(node).__name__} is not allowed")


# ---- vendor operators (the closed set of kernels.family.VENDOR_OPS) ----------------------
def _softmax_last_dim(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (torch.softmax(x, -1),)


def _addmm_bias_relu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor
                     ) -> tuple[torch.Tensor, ...]:
    # fp32 as the family computes it: cuBLAS without TF32 (the setting left as it was)
    matmul = torch.backends.cuda.matmul
    if not matmul.allow_tf32:
        return (torch.relu_(torch.addmm(bias, a, b)),)
    matmul.allow_tf32 = False
    try:
        return (torch.relu_(torch.addmm(bias, a, b)),)
    finally:
        matmul.allow_tf32 = True


VENDOR_OPS: dict[str, Callable[..., tuple[torch.Tensor, ...]]] = {
    "softmax_last_dim": _softmax_last_dim,
    "addmm_bias_relu": _addmm_bias_relu,
}


# ---- the CUDA driver -----------------------------------------------------------------------
_DRIVER: Any = None
_DRIVER_LOCK = threading.Lock()
_PRIMARY: dict[int, Any] = {}


def _driver() -> Any:
    global _DRIVER
    if _DRIVER is None:
        with _DRIVER_LOCK:
            if _DRIVER is None:
                from cuda.bindings import driver

                _check(driver, driver.cuInit(0), "cuInit")
                _DRIVER = driver
    return _DRIVER


def _check(cu: Any, result: Any, call: str) -> Any:
    """The values after a driver call's CUresult; RuntimeError naming the call on a failure."""
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{call} failed: {err!r}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


class _Current:
    """Device ``index``'s primary context (torch's) current on this thread for the ``with``
    block, the thread's own context restored after it where it was another."""

    __slots__ = ("cu", "index", "previous")

    def __init__(self, cu: Any, index: int) -> None:
        self.cu, self.index, self.previous = cu, index, None

    def __enter__(self) -> None:
        cu = self.cu
        primary = _PRIMARY.get(self.index)
        if primary is None:
            device = _check(cu, cu.cuDeviceGet(self.index), "cuDeviceGet")
            primary = _PRIMARY[self.index] = _check(cu, cu.cuDevicePrimaryCtxRetain(device),
                                                    "cuDevicePrimaryCtxRetain")
        current = _check(cu, cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is None or int(current) != int(primary):
            _check(cu, cu.cuCtxSetCurrent(primary), "cuCtxSetCurrent")
            self.previous = current

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None and int(self.previous):
            self.cu.cuCtxSetCurrent(self.previous)
        self.previous = None


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(index: int) -> int:
    """torch's current stream on device ``index``, as the driver's handle."""
    if _RAW_STREAM is not None:
        return int(_RAW_STREAM(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


class _Launches:
    """The kernel launches of one dispatch entry on one device, prepared once: each step's
    function, grid, block, shared memory and packed argument array. A pointer argument points
    into one array of the call's pointers (inputs, then outputs, then the workspace), which a
    call fills with one slice assignment before launching the steps in order."""

    __slots__ = ("steps", "pointers", "storage", "lock", "ok")

    def __init__(self, cu: Any, positions: int) -> None:
        #: ((function, grid x, y, z, block x, y, z, shared memory), argument array, name)
        self.steps: list[tuple[tuple[Any, ...], int, str]] = []
        #: the call's pointers, by position
        self.pointers = (ctypes.c_void_p * positions)()
        self.storage: list[Any] = []
        self.lock = threading.Lock()
        self.ok = cu.CUresult.CUDA_SUCCESS

    def add(self, fn: Any, name: str, grid: Sequence[int], block: Sequence[int], smem: int,
            args: Sequence[tuple[str, Any]]) -> None:
        """A step; ``args`` in the kernel's order, each ``("pointer", position)`` or
        ``("value", (ctype, number))``."""
        base = ctypes.addressof(self.pointers)
        size = ctypes.sizeof(ctypes.c_void_p)
        addresses: list[int] = []
        for kind, value in args:
            if kind == "pointer":
                addresses.append(base + size * int(value))
            else:
                ctype, number = value
                cell = ctype(number)
                self.storage.append(cell)
                addresses.append(ctypes.addressof(cell))
        params = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        self.storage.append(params)
        head = (fn, *(int(v) for v in grid), *(int(v) for v in block), int(smem))
        self.steps.append((head, ctypes.addressof(params), name))

    def launch(self, cu: Any, pointers: list[Any], stream: int) -> tuple[Any, int] | None:
        """Every step on ``stream`` with ``pointers`` (one for each position); None, or the
        failing result and the failing step's number (the steps before it were launched)."""
        call = cu.cuLaunchKernel
        ok = self.ok
        with self.lock:
            self.pointers[:] = pointers
            for number, (head, params, _name) in enumerate(self.steps):
                result = call(*head, stream, params, 0)
                if result[0] != ok:
                    return result[0], number
        return None

    def failure(self, failed: tuple[Any, int]) -> RuntimeError:
        err, number = failed
        head, _params, name = self.steps[number]
        return RuntimeError(f"cuLaunchKernel of {name} grid {head[1:4]} block {head[4:7]} "
                            f"smem {head[7]}: {err!r}")


#: launch results that say the thread's current context is not the one the cubins were loaded
#: in (none, or another): the launch is made again with the device's primary context current
_CONTEXT_ERRORS = ("CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_INVALID_HANDLE",
                   "CUDA_ERROR_CONTEXT_IS_DESTROYED")
#: a workspace up to this size is kept from call to call (one a device and stream, outside
#: CUDA-graph capture); a larger one is allocated per call, where its kernels take far longer
#: than the allocation
SCRATCH_BYTES = 1 << 20
#: streams a kernel keeps a workspace for (then it forgets them all and starts again)
MAX_SCRATCH_STREAMS = 64
_IS_COMPILING = torch.compiler.is_compiling
_CAPTURING = getattr(torch._C, "_cuda_isCurrentStreamCapturing",
                     torch.cuda.is_current_stream_capturing)


_SLEEP = getattr(torch.cuda, "_sleep", None)


def _hold(us: float) -> None:
    """A kernel that keeps torch's current stream busy for about ``us`` microseconds (at
    most 20 ms; counted at 2 GHz, longer on a slower clock) where torch has one."""
    if _SLEEP is not None:
        _SLEEP(int(min(us, 20000.0) * 2000))


def _seen_key(inputs: Sequence[Any], index: int) -> tuple[Any, ...]:
    """The key of a call's plan: its inputs' shapes and device index."""
    if len(inputs) == 1:
        return (inputs[0].shape, index)
    return (*[t.shape for t in inputs], index)


class _Plan:
    """What a call at one shape on one device runs, prepared once: the outputs to allocate,
    and the entry's launches or the fallback. A call on inputs of a shape already seen (their
    dtype, contiguity and device checked again, the rest of the checks being the shape's) goes
    straight to :meth:`repeat`'s function."""

    __slots__ = ("kernel", "dims", "index", "device", "outs", "inouts", "workspace",
                 "launches", "in_shapes", "out_shapes")

    def __init__(self, kernel: Kernel, dims: dict[str, int], index: int,
                 launches: _Launches | None, launch: Mapping[str, Any] | None = None) -> None:
        self.kernel, self.dims, self.index = kernel, dims, index
        self.device = torch.device("cuda", index)
        #: (shape, dtype, input position of an inout buffer or -1) of each output
        self.outs = [(kernel._shape(b, dims), TORCH_DTYPES[b["dtype"]],
                      kernel.inputs.index(b) if b["role"] == "inout" else -1)
                     for b in kernel.outputs]
        self.inouts = any(position >= 0 for _s, _d, position in self.outs)
        self.launches = launches
        self.workspace = int((launch or {}).get("workspace_bytes") or 0)
        self.in_shapes = [kernel._shape(b, dims) for b in kernel.inputs]
        self.out_shapes = [shape for shape, _d, _p in self.outs]

    def repeat(self) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """What runs a repeat call at this plan with its launches: :meth:`run`'s work in one
        function with everything it reads bound once (outputs allocated, pointers filled,
        the stream's kept workspace, the launches; a failed launch retried or raised as
        :meth:`run` does). The fallback, an inout buffer or a workspace over
        :data:`SCRATCH_BYTES` take :meth:`run` itself."""
        launches = self.launches
        if launches is None or self.inouts or self.workspace > SCRATCH_BYTES:
            return self.run
        empty, device, index, size = torch.empty, self.device, self.index, self.workspace
        outs = [(shape, dtype) for shape, dtype, _position in self.outs]
        scratch, kernel, launch = self.kernel._scratch, self.kernel, launches.launch
        raw = _RAW_STREAM
        capturing = _CAPTURING

        def repeat(inputs: Sequence[Any]) -> tuple[Any, ...]:
            made = tuple([empty(shape, dtype=dtype, device=device) for shape, dtype in outs])
            pointers = [t.data_ptr() for t in inputs]
            pointers += [o.data_ptr() for o in made]
            stream = raw(index) if raw is not None else _stream(index)
            if size:
                kept = None if capturing() else scratch.get((index, stream))
                if kept is None or kept.numel() < size:
                    kept = kernel._workspace(size, index, stream, device)
                pointers.append(kept.data_ptr())
            else:
                pointers.append(0)
            failed = launch(_DRIVER, pointers, stream)
            if failed is not None:
                _retry(launches, failed, pointers, stream, index)
            return made
        return repeat

    def run(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        """The outputs of the call, in signature order, its kernels launched on torch's
        current stream. The launch is made with whatever context the thread has current
        (torch keeps the device's primary context current where it runs); a launch refused
        for its context is made again with the primary context current, the thread's own
        restored after it."""
        launches = self.launches
        if launches is None:
            return self.kernel._fallback(inputs, self)
        device = self.device
        if self.inouts:
            outs = [torch.empty(shape, dtype=dtype, device=device) if position < 0
                    else inputs[position].clone().view(shape)
                    for shape, dtype, position in self.outs]
        else:
            outs = [torch.empty(shape, dtype=dtype, device=device)
                    for shape, dtype, _position in self.outs]
        pointers = [t.data_ptr() for t in inputs]
        pointers += [o.data_ptr() for o in outs]
        index = self.index
        stream = _stream(index)
        workspace = None
        if self.workspace:
            workspace = self.kernel._workspace(self.workspace, index, stream, device)
            pointers.append(workspace.data_ptr())
        else:
            pointers.append(0)
        failed = launches.launch(_DRIVER, pointers, stream)
        if failed is not None:
            _retry(launches, failed, pointers, stream, index)
        return tuple(outs)


def _retry(launches: _Launches, failed: tuple[Any, int], pointers: list[Any], stream: int,
           index: int) -> None:
    """After ``failed`` (a launch's result and step): the launches made again with device
    ``index``'s primary context current where the first step was refused for the thread's
    context; else, or when that fails too, the RuntimeError naming the step."""
    if failed[1] == 0 and getattr(failed[0], "name", "") in _CONTEXT_ERRORS:
        with _Current(_DRIVER, index):
            again = launches.launch(_DRIVER, pointers, stream)
        if again is None:
            return
        failed = again
    raise launches.failure(failed)


class Dispatch(NamedTuple):
    """What a call at one shape runs: the shape, its dispatch entry (None: the fallback), a
    description (``point 1a2b… (tuned)``, ``vendor torch.softmax``, ``reference kernel``) and,
    where its near-ties were timed on this GPU, what was timed (:meth:`Kernel.ties`)."""

    shape: dict[str, int]
    entry: dict[str, Any] | None
    runs: str
    timed: dict[str, Any] | None = None


class Kernel:
    """One family of a bundle as a callable on torch tensors."""

    def __init__(self, bundle: Path, info: dict[str, Any], namespace: str) -> None:
        self.bundle = bundle
        self.info = info
        family = info["family"]
        #: the callable's name: the family's, as a Python identifier
        self.name: str = re.sub(r"\W", "_", family["display_name"])
        self.dims: list[dict[str, Any]] = family["dims"]
        self.dim_names = [d["name"] for d in self.dims]
        signature = family["signature"]
        self.buffers: list[dict[str, Any]] = signature["buffers"]
        self.scalars: list[dict[str, Any]] = signature["scalars"]
        self.inputs = [b for b in self.buffers if b["role"] in ("in", "inout")]
        self.outputs = [b for b in self.buffers if b["role"] in ("out", "inout")]
        for arg in [*self.buffers, *self.scalars]:
            if arg["dtype"] not in C_TYPES or TORCH_DTYPES[arg["dtype"]] is None:
                raise BundleError(f"{arg['name']}: dtype {arg['dtype']!r} is not supported "
                                  f"by this torch")
        self.gpu: dict[str, Any] = info["gpu"]
        self.capability = _capability(self.gpu["arch"])
        self.vendor: dict[str, Any] | None = info.get("vendor")
        self.reference: dict[str, Any] | None = info.get("reference")
        self.fallback: str = info["fallback"]
        if self.fallback == "vendor" and (self.vendor or {}).get("op") not in VENDOR_OPS:
            raise BundleError(f"vendor op {(self.vendor or {}).get('op')!r} is not one this "
                              f"loader implements ({', '.join(VENDOR_OPS)})")
        self.points: dict[str, dict[str, Any]] = info["points"]
        self.entries: dict[tuple[int, ...], dict[str, Any]] = {}
        for entry in info["entries"]:
            key = tuple(int(entry["shape"][n]) for n in self.dim_names)
            self.entries[key] = entry
        self._reported: set[tuple[int, ...]] = set()
        #: what a call on inputs of each (input shapes, device index) seen runs, given the
        #: inputs: its plan's repeat function, or the vendor operator itself for a fallback
        #: needing no view (:meth:`_runner`); a repeat skips the shape's checks
        self._plans: dict[tuple[Any, ...], Callable[[Sequence[Any]], tuple[Any, ...]]] = {}
        #: the plan of each (device index, dims)
        self._by_dims: dict[tuple[int, tuple[int, ...]], _Plan] = {}
        self._input_dtypes = [TORCH_DTYPES[b["dtype"]] for b in self.inputs]
        #: a buffer's (or the workspace's) position in a call's pointers: inputs, outputs
        self._position: dict[str, int] = {b["name"]: i for i, b in enumerate(self.inputs)}
        self._position.update({b["name"]: len(self.inputs) + i
                               for i, b in enumerate(self.outputs)})
        self._position[WORKSPACE] = len(self.inputs) + len(self.outputs)
        self._modules: dict[tuple[int, str], Any] = {}
        #: the workspace kept for small ones, by (device index, stream)
        self._scratch: dict[tuple[int, int], Any] = {}
        self._devices_ok: set[int] = set()
        #: devices whose name is not the bundle's GPU's (near-ties are timed there)
        self._elsewhere: set[int] = set()
        #: per (device index, dims), the near-ties timed there (:meth:`ties`)
        self._timed: dict[tuple[int, tuple[int, ...]], dict[str, Any]] = {}
        self._lock = threading.Lock()
        #: the custom operator's name (``torch.ops.<namespace>.<name>``)
        self.qualname = f"{namespace}::{self.name}"
        self.op = _register(namespace, self)

    def __repr__(self) -> str:
        return (f"<tuneforge kernel {self.name}: {len(self.entries)} shapes, fallback "
                f"{self.fallback}, {self.gpu['name']} {self.gpu['arch']}>")

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *inputs: Any, **scalars: Any) -> Any:
        """Run at the inputs' shape; the output tensor (a tuple for several outputs)."""
        if not scalars and not _IS_COMPILING():
            run = self._seen(inputs)
            if run is not None:
                outs = run(inputs)
                return outs[0] if len(outs) == 1 else outs
        if _IS_COMPILING():
            return self._call_op(inputs, scalars)
        outs = self.run(inputs, scalars)
        return outs[0] if len(outs) == 1 else outs

    def _call_op(self, inputs: tuple[Any, ...], scalars: dict[str, Any]) -> Any:
        unknown = [k for k in scalars if k not in {s["name"] for s in self.scalars}]
        if unknown:
            raise InputError(f"{self.name}: unknown argument(s) {', '.join(unknown)}")
        return self.op(*inputs, *[scalars.get(s["name"]) for s in self.scalars])

    def lookup(self, *inputs: Any, **scalars: Any) -> Dispatch:
        """What a call with these inputs would run, the fallback reported as a call reports
        it; the inputs are checked as a call checks them, but for their device (a CPU or
        ``meta`` tensor stands for a shape). Where a call on another GPU timed the entry's
        near-ties (on the inputs' device, or any for a CPU or ``meta`` tensor), the point
        that runs there and the times."""
        dims, key = self._check(inputs, scalars, device=False)
        found = self._dispatch(dims, key)
        device = getattr(inputs[0], "device", None)
        index = None
        if device is not None and device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
        timed = next((t for (i, k), t in list(self._timed.items())
                      if k == key and index in (None, i)), None)
        if timed is None or found.entry is None:
            return found
        return found._replace(
            runs=f"point {timed['point']} ({found.entry['source']}; the fastest of "
                 f"{len(timed['us'])} near-ties timed on cuda:{timed['device']})", timed=timed)

    def run(self, inputs: Sequence[Any], scalars: Mapping[str, Any]) -> tuple[Any, ...]:
        """Check, dispatch and launch; the outputs in signature order."""
        run = self._seen(inputs) if not scalars else None
        if run is None:
            dims, key = self._check(inputs, scalars)
            run = self._plan(inputs, dims, key, remember=not scalars).run
        return run(inputs)

    def _seen(self, inputs: Sequence[Any]
              ) -> Callable[[Sequence[Any]], tuple[Any, ...]] | None:
        """What runs a call whose inputs have the shapes and device of an earlier checked
        call and pass the checks that depend on more than their shape (dtype, contiguity,
        device); None sends the call to the full check."""
        try:
            index = inputs[0].get_device()
            run = self._plans.get(_seen_key(inputs, index))
        except (AttributeError, IndexError, TypeError):
            return None
        if run is None:
            return None
        for t, dtype in zip(inputs, self._input_dtypes, strict=False):  # the key has them all
            if t.dtype is not dtype or not t.is_contiguous() or t.get_device() != index:
                return None
        return run

    def _plan(self, inputs: Sequence[Any], dims: dict[str, int], key: tuple[int, ...],
              remember: bool) -> _Plan:
        """The plan of checked inputs at ``dims`` (prepared on the first call at the shape on
        the inputs' device); ``remember`` keys it by the inputs' shapes for :meth:`_seen`."""
        device = inputs[0].device
        index = device.index if device.index is not None else torch.cuda.current_device()
        plan = self._by_dims.get((index, key))
        if plan is None:
            entry = self._dispatch(dims, key).entry
            if entry is None:
                plan = _Plan(self, dims, index, None)
            else:
                cu = _driver()
                with _Current(cu, index):
                    launches = self._prepare(cu, index, entry, dims)
                plan = _Plan(self, dims, index, launches, entry["launch"])
                if entry.get("alternates") and index in self._elsewhere:
                    if _CAPTURING():  # nothing can be timed: the entry's point, this once
                        return plan
                    try:
                        with torch.cuda.device(index):
                            plan = self._time_ties(cu, inputs, plan, entry, key)
                    except Exception as exc:  # timing is an optimisation: the entry's point
                        message = (f"tuneforge_loader: {self.name} at {_text(dims)}: its "
                                   f"near-ties could not be timed ({type(exc).__name__}: "
                                   f"{exc}); the entry's point runs")
                        LOG.warning(message)
                        warnings.warn(message, DeviceWarning, stacklevel=4)
            with self._lock:
                if len(self._by_dims) >= MAX_KNOWN_SHAPES:
                    self._by_dims.clear()
                self._by_dims[(index, key)] = plan
        if remember:
            with self._lock:
                if len(self._plans) >= MAX_KNOWN_SHAPES:
                    self._plans.clear()
                self._plans[_seen_key(inputs, index)] = self._runner(inputs, plan)
        return plan

    def _runner(self, inputs: Sequence[Any], plan: _Plan
                ) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """What runs a repeat call on inputs of these shapes at ``plan``: the vendor operator
        itself where the plan is the vendor fallback and the inputs have the family's shapes
        (its outputs then have them too), else the plan's repeat function."""
        if (plan.launches is None and self.fallback == "vendor" and self.vendor is not None
                and all(t.shape == s for t, s in zip(inputs, plan.in_shapes, strict=True))):
            op = VENDOR_OPS[self.vendor["op"]]

            def vendor(inputs: Sequence[Any]) -> tuple[Any, ...]:
                return op(*inputs)
            return vendor
        return plan.repeat()

    def _time_ties(self, cu: Any, inputs: Sequence[Any], first: _Plan, entry: dict[str, Any],
                   key: tuple[int, ...]) -> _Plan:
        """On a GPU other than the bundle's: ``entry``'s point (``first``) and its near-ties,
        each timed back to back on ``inputs`` in :data:`TIE_ROUNDS` rounds taken in turn (the
        best round counts); the plan of the fastest where it beats the entry's point by more
        than :data:`TIE_MARGIN`, else ``first``. Logged at INFO; :meth:`ties` reports it."""
        index = first.index
        plans: dict[str, _Plan] = {entry["point"]: first}
        for alt in entry["alternates"]:
            with _Current(cu, index):
                launches = self._prepare(cu, index, alt, first.dims)
            plans[alt["point"]] = _Plan(self, first.dims, index, launches, alt["launch"])
        stream = torch.cuda.current_stream(first.device)
        calls: dict[str, int] = {}
        host_us = 0.0
        for pid, plan in plans.items():  # loads, first launches, one call's time
            plan.run(inputs)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record(stream)
            began = time.perf_counter()
            plan.run(inputs)
            host_us = max(host_us, (time.perf_counter() - began) * 1e6)
            end.record(stream)
            end.synchronize()
            once = max(start.elapsed_time(end) * 1000.0, 1.0)
            calls[pid] = max(1, min(1000, math.ceil(TIE_ROUND_US / once)))
        best = {pid: math.inf for pid in plans}
        for _round in range(TIE_ROUNDS):
            for pid, plan in plans.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                # the GPU held while the calls are queued: the round times the GPU's work
                # alone, not the host's launches between the calls
                _hold(2.0 * host_us * calls[pid] + 50.0)
                start.record(stream)
                for _call in range(calls[pid]):
                    plan.run(inputs)
                end.record(stream)
                end.synchronize()
                best[pid] = min(best[pid], start.elapsed_time(end) * 1000.0 / calls[pid])
        fastest = min(best, key=lambda pid: best[pid])
        chosen = (fastest if best[fastest] < best[entry["point"]] * (1.0 - TIE_MARGIN)
                  else entry["point"])
        self._timed[(index, key)] = {"device": index, "point": chosen,
                                     "us": {pid: round(us, 2) for pid, us in best.items()}}
        LOG.info("tuneforge_loader: %s at %s on cuda:%d (%s): timed the entry's point and "
                 "%d near-tie(s): %s; runs %s", self.name, _text(first.dims), index,
                 torch.cuda.get_device_name(index), len(plans) - 1,
                 ", ".join(f"{pid} {us:.1f} µs" for pid, us in best.items()), chosen)
        return plans[chosen]

    def ties(self, index: int = 0) -> dict[tuple[int, ...], dict[str, Any]]:
        """The near-ties timed on device ``index`` so far, by shape (the dims in order): the
        point that runs (``point``) and each point's time a call (``us``, µs)."""
        return {key: dict(found) for (i, key), found in list(self._timed.items())
                if i == index}

    def _workspace(self, size: int, index: int, stream: int, device: Any) -> Any:
        """A workspace of ``size`` bytes for a launch on ``stream``: up to
        :data:`SCRATCH_BYTES` the stream's kept one (calls on one stream run one after
        another), outside CUDA-graph capture; else a fresh one."""
        if size > SCRATCH_BYTES or _CAPTURING():
            return torch.empty(size, dtype=torch.uint8, device=device)
        kept = self._scratch.get((index, stream))
        if kept is None or kept.numel() < size:
            with self._lock:
                kept = self._scratch.get((index, stream))
                if kept is None or kept.numel() < size:  # one outgrown is freed: its
                    # block is reused on this stream only after the kernels queued before
                    kept = torch.empty(max(size, 2 * (kept.numel() if kept is not None else 0)),
                                       dtype=torch.uint8, device=device)
                    if len(self._scratch) >= MAX_SCRATCH_STREAMS:
                        self._scratch.clear()
                    self._scratch[(index, stream)] = kept
        return kept

    def _fallback(self, inputs: Sequence[Any], plan: _Plan) -> tuple[Any, ...]:
        """The family's fallback at ``plan``'s shape: its vendor operator, else its reference
        kernel, else :class:`NoFallback`."""
        if self.fallback == "vendor":
            assert self.vendor is not None
            shaped = [t if t.shape == shape else t.view(shape)
                      for t, shape in zip(inputs, plan.in_shapes, strict=True)]
            outs = VENDOR_OPS[self.vendor["op"]](*shaped)
            return tuple(o if o.shape == shape else o.view(shape)
                         for o, shape in zip(outs, plan.out_shapes, strict=True))
        if self.fallback == "reference":
            return self._run_reference(inputs, plan.dims)
        raise NoFallback(f"{self.name} has no dispatch entry at {_text(plan.dims)} and no "
                         "fallback (no vendor operator, no reference launch in the bundle); "
                         "shapes with entries: "
                         f"{', '.join(_text(e['shape']) for e in self.entries.values())}")

    def _dispatch(self, dims: dict[str, int], key: tuple[int, ...]) -> Dispatch:
        entry = self.entries.get(key)
        if entry is not None:
            return Dispatch(dims, entry, f"point {entry['point']} ({entry['source']})")
        runs = (f"vendor {self.vendor['name']}" if self.fallback == "vendor" and self.vendor
                else "reference kernel" if self.fallback == "reference" else "nothing")
        if key not in self._reported:
            self._reported.add(key)
            message = (f"tuneforge_loader: {self.name} has no dispatch entry at {_text(dims)}; "
                       f"running the fallback: {runs}")
            LOG.info(message)
            warnings.warn(message, FallbackWarning, stacklevel=4)
        return Dispatch(dims, None, runs)

    # -- input checks ------------------------------------------------------------------------
    def _check(self, inputs: Sequence[Any], scalars: Mapping[str, Any], device: bool = True
               ) -> tuple[dict[str, int], tuple[int, ...]]:
        """The shape of a call (dims in order) after every check but the launch's."""
        if len(inputs) != len(self.inputs):
            wanted = ", ".join(b["name"] for b in self.inputs)
            raise InputError(f"{self.name} takes {len(self.inputs)} tensor(s) ({wanted}), got "
                             f"{len(inputs)}")
        known = {s["name"]: s for s in self.scalars}
        for name in scalars:
            if name not in known:
                raise InputError(f"{self.name}: unknown argument {name!r} (scalars: "
                                 f"{', '.join(known) or 'none'})")
        bound: dict[str, int] = {}
        for t, buf in zip(inputs, self.inputs, strict=True):
            arg = f"{self.name}: argument {buf['name']}"
            if not isinstance(t, torch.Tensor):
                raise InputError(f"{arg} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype != TORCH_DTYPES[buf["dtype"]]:
                raise InputError(f"{arg} has dtype {t.dtype}, expected "
                                 f"{TORCH_DTYPES[buf['dtype']]}")
            if not t.is_contiguous():
                raise InputError(f"{arg} is not contiguous (strides {tuple(t.stride())}); "
                                 "pass .contiguous()")
            names = buf.get("shape")
            if names and t.dim() == len(names):
                for name, size in zip(names, t.shape, strict=True):
                    self._bind(bound, name, int(size), arg)
            elif names and t.dim() != 1:  # a flat tensor's dims come from other arguments
                raise InputError(f"{arg} has shape {tuple(t.shape)}: expected "
                                 f"({', '.join(names)})")
        for sc in self.scalars:
            if sc["name"] in scalars and sc["value"] in self.dim_names:
                self._bind(bound, sc["value"], scalars[sc["name"]],
                           f"{self.name}: argument {sc['name']}")
        missing = [n for n in self.dim_names if n not in bound]
        if missing:
            raise InputError(f"{self.name}: cannot tell {', '.join(missing)} from the "
                             "arguments (pass the tensors shaped by their dimensions, or the "
                             "scalars that give them)")
        for d in self.dims:
            value = bound[d["name"]]
            if not d["min"] <= value <= d["max"]:
                raise InputError(f"{self.name}: {d['name']}={value} is outside the family's "
                                 f"bounds [{d['min']}, {d['max']}]")
        dims = {n: bound[n] for n in self.dim_names}
        for t, buf in zip(inputs, self.inputs, strict=True):
            count = int(evaluate(buf["count"], dims))
            if t.numel() != count:
                raise InputError(f"{self.name}: argument {buf['name']} has {t.numel()} "
                                 f"elements, expected {buf['count']} = {count} at "
                                 f"{_text(dims)}")
        for sc in self.scalars:
            if sc["name"] in scalars and sc["value"] not in self.dim_names:
                value = evaluate(sc["value"], dims)
                if scalars[sc["name"]] != value:
                    raise InputError(f"{self.name}: argument {sc['name']}="
                                     f"{scalars[sc['name']]!r}, expected {sc['value']} = "
                                     f"{value} at {_text(dims)}")
        if device:
            self._check_device(inputs)
        return dims, tuple(dims[n] for n in self.dim_names)

    @staticmethod
    def _bind(bound: dict[str, int], name: str, value: Any, arg: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{arg}: {name} must be an integer, got {value!r}")
        if name in bound and bound[name] != value:
            raise InputError(f"{arg} gives {name}={value}, but an earlier argument gave "
                             f"{name}={bound[name]}")
        bound[name] = value

    def _check_device(self, inputs: Sequence[Any]) -> None:
        device = inputs[0].device
        for t, buf in zip(inputs, self.inputs, strict=True):
            if t.device.type != "cuda":
                raise InputError(f"{self.name}: argument {buf['name']} is on {t.device}; the "
                                 f"bundle's kernels run on CUDA ({self.gpu['arch']})")
            if t.device != device:
                raise InputError(f"{self.name}: argument {buf['name']} is on {t.device}, "
                                 f"{self.inputs[0]['name']} on {device}")
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._devices_ok:
            found = torch.cuda.get_device_capability(index)
            if tuple(found) != self.capability:
                raise InputError(
                    f"{self.name}: argument {self.inputs[0]['name']} is on cuda:{index}, "
                    f"compute capability {found[0]}.{found[1]}; the bundle's cubins are for "
                    f"{self.gpu['arch']} ({self.gpu['name']})")
            name = torch.cuda.get_device_name(index)
            if name != self.gpu["name"]:
                self._elsewhere.add(index)
                message = (f"tuneforge_loader: {self.name} was tuned on {self.gpu['name']} and "
                           f"runs on cuda:{index}, {name} (both {self.gpu['arch']}): its points "
                           "are correct here, but a library tuned on this GPU may be faster")
                LOG.info(message)
                warnings.warn(message, DeviceWarning, stacklevel=5)
            self._devices_ok.add(index)

    def fake_dims(self, inputs: Sequence[Any], scalars: Mapping[str, Any]
                  ) -> dict[str, Any]:
        """The dims of a traced call (sizes may be symbolic): from the inputs' shapes and the
        scalars given, checked for dtype, layout and agreement as a call checks them."""
        bound: dict[str, Any] = {}
        if len(inputs) != len(self.inputs):
            raise InputError(f"{self.name} takes {len(self.inputs)} tensor(s), got "
                             f"{len(inputs)}")
        for t, buf in zip(inputs, self.inputs, strict=True):
            if t.dtype != TORCH_DTYPES[buf["dtype"]]:
                raise InputError(f"{self.name}: argument {buf['name']} has dtype {t.dtype}, "
                                 f"expected {TORCH_DTYPES[buf['dtype']]}")
            names = buf.get("shape")
            if names and t.dim() == len(names):
                for name, size in zip(names, t.shape, strict=True):
                    bound.setdefault(name, size)
        for sc in self.scalars:
            if sc["name"] in scalars and sc["value"] in self.dim_names:
                bound.setdefault(sc["value"], scalars[sc["name"]])
        missing = [n for n in self.dim_names if n not in bound]
        if missing:
            raise InputError(f"{self.name}: cannot tell {', '.join(missing)} from the arguments")
        return bound

    def _shape(self, buf: Mapping[str, Any], dims: Mapping[str, Any]) -> tuple[Any, ...]:
        names = buf.get("shape")
        if names:
            return tuple(dims[n] for n in names)
        return (evaluate(buf["count"], dims),)

    # -- launching -----------------------------------------------------------------------------
    def _prepare(self, cu: Any, index: int, entry: dict[str, Any], dims: dict[str, int]
                 ) -> _Launches:
        """The launches of ``entry`` on device ``index`` (its module loaded, attributes set,
        a persistent grid cut to the CTAs resident at once); the device's primary context is
        current."""
        with self._lock:
            launch = entry["launch"]
            module = self._module(cu, index, self.points[entry["point"]]["cubin"])
            resolved = {s["name"]: (C_TYPES[s["dtype"]], evaluate(s["value"], dims))
                        for s in self.scalars}
            position = self._position
            main_args: list[tuple[str, Any]] = [("pointer", position[b["name"]])
                                                for b in self.buffers]
            main_args += [("value", resolved[s["name"]]) for s in self.scalars]
            if int(launch.get("workspace_bytes") or 0):
                main_args.append(("pointer", position[WORKSPACE]))
            launches = _Launches(cu, len(self.inputs) + len(self.outputs) + 1)
            if launch.get("prologue"):
                self._aux_step(cu, module, launch["prologue"], resolved, launches)
            fn = _function(cu, module, launch["kernel_name"])
            smem = int(launch.get("dynamic_smem_bytes") or 0)
            if smem > DEFAULT_SMEM_LIMIT:
                _check(cu, cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem), "cuFuncSetAttribute(max dynamic shared memory)")
            if int(launch.get("cluster_size") or 1) > 1:
                _check(cu, cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1), "cuFuncSetAttribute(non-portable cluster size)")
            grid = [int(v) for v in launch["grid"]]
            if launch.get("persistent"):
                grid[0] = _persistent_x(cu, fn, index, launch)
            launches.add(fn, launch["kernel_name"], grid, launch["block"], smem, main_args)
            if launch.get("epilogue"):
                self._aux_step(cu, module, launch["epilogue"], resolved, launches)
            return launches

    def _aux_step(self, cu: Any, module: Any, aux: Mapping[str, Any],
                  resolved: Mapping[str, tuple[Any, Any]], launches: _Launches) -> None:
        args: list[tuple[str, Any]] = []
        for arg in aux["args"]:
            if isinstance(arg, int) and not isinstance(arg, bool):
                args.append(("value", (ctypes.c_int32, arg)))
            elif arg in self._position:  # a buffer or the workspace
                args.append(("pointer", self._position[arg]))
            elif arg in resolved:
                args.append(("value", resolved[arg]))
            else:
                raise BundleError(f"{aux['kernel_name']}: argument {arg!r} is not a buffer, a "
                                  f"scalar, {WORKSPACE!r} or an integer")
        fn = _function(cu, module, aux["kernel_name"])
        launches.add(fn, aux["kernel_name"], aux["grid"], aux["block"], 0, args)

    def _module(self, cu: Any, index: int, cubin: str) -> Any:
        module = self._modules.get((index, cubin))
        if module is None:
            image = (self.bundle / cubin).read_bytes()
            module = _check(cu, cu.cuModuleLoadData(image), f"cuModuleLoadData({cubin})")
            self._modules[(index, cubin)] = module
        return module

    def _run_reference(self, inputs: Sequence[Any], dims: dict[str, int]) -> tuple[Any, ...]:
        """The family's reference kernel at ``dims``, its outputs cast to the declared dtypes."""
        ref = self.reference
        if ref is None or not ref.get("launch"):
            raise NoFallback(f"{self.name}: the bundle has no reference launch")
        device = inputs[0].device
        index = device.index if device.index is not None else torch.cuda.current_device()
        cu = _driver()
        with _Current(cu, index):
            return self._launch_reference(cu, index, ref, inputs, dims)

    def _launch_reference(self, cu: Any, index: int, ref: dict[str, Any],
                          inputs: Sequence[Any], dims: dict[str, int]) -> tuple[Any, ...]:
        device = inputs[0].device
        with self._lock:
            module = self._module(cu, index, ref["cubin"])
        fn = _function(cu, module, ref["kernel_name"])
        launch = ref["launch"]
        grid = [max(1, int(evaluate(e, dims))) for e in launch["grid"]]
        block = [int(evaluate(e, dims)) for e in launch["block"]]
        smem = int(evaluate(launch.get("dynamic_smem") or "0", dims))
        if smem > DEFAULT_SMEM_LIMIT:
            _check(cu, cu.cuFuncSetAttribute(
                fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem), "cuFuncSetAttribute(max dynamic shared memory)")
        by_name = {b["name"]: t for b, t in zip(self.inputs, inputs, strict=True)}
        wide = ref["outputs_dtype"] == "float64"
        written: dict[str, Any] = {}
        pointers: dict[str, int] = {}
        args: list[tuple[str, Any]] = []
        keep: list[Any] = []
        if ref["style"] == "same_signature":
            for buf in self.buffers:
                if buf["role"] == "in":
                    pointers[buf["name"]] = by_name[buf["name"]].data_ptr()
                else:
                    if buf["role"] == "inout":
                        raise BundleError("a same-signature reference cannot take inout "
                                          "buffers")
                    dtype = torch.float64 if wide else TORCH_DTYPES[buf["dtype"]]
                    out = torch.empty(self._shape(buf, dims), dtype=dtype, device=device)
                    written[buf["name"]] = out
                    pointers[buf["name"]] = out.data_ptr()
                args.append(("pointer", buf["name"]))
        else:  # contract: inputs, then (ref, scale) in float64 per output, then scalars
            for buf in self.inputs:
                pointers[buf["name"]] = by_name[buf["name"]].data_ptr()
                args.append(("pointer", buf["name"]))
            for buf in self.outputs:
                out = torch.empty(self._shape(buf, dims), dtype=torch.float64, device=device)
                scale = torch.empty_like(out)
                keep.append(scale)
                written[buf["name"]] = out
                pointers[buf["name"]] = out.data_ptr()
                pointers[buf["name"] + ".scale"] = scale.data_ptr()
                args += [("pointer", buf["name"]), ("pointer", buf["name"] + ".scale")]
        for sc in self.scalars:
            args.append(("value", (C_TYPES[sc["dtype"]], evaluate(sc["value"], dims))))
        order = {name: i for i, name in enumerate(pointers)}
        launches = _Launches(cu, max(1, len(order)))
        launches.add(fn, ref["kernel_name"], grid, block, smem,
                     [(kind, order[value]) if kind == "pointer" else (kind, value)
                      for kind, value in args])
        failed = launches.launch(cu, list(pointers.values()), _stream(index))
        if failed is not None:
            raise launches.failure(failed)
        return tuple(written[b["name"]].to(TORCH_DTYPES[b["dtype"]]) for b in self.outputs)


def _function(cu: Any, module: Any, name: str) -> Any:
    return _check(cu, cu.cuModuleGetFunction(module, name.encode()),
                  f"cuModuleGetFunction({name})")


def _persistent_x(cu: Any, fn: Any, index: int, launch: Mapping[str, Any]) -> int:
    """Grid x of a persistent launch: its own, cut to the CTAs resident at once (whole
    clusters, ``cuOccupancyMaxActiveClusters``; else the CTAs an SM times the SMs), a whole
    number of its ``group``."""
    block = [int(v) for v in launch["block"]]
    smem = int(launch.get("dynamic_smem_bytes") or 0)
    width = _check(cu, cu.cuFuncGetAttribute(
        cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, fn),
        "cuFuncGetAttribute(cluster width)")
    if width > 1:
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = (int(v) for v in launch["grid"])
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = smem
        clusters = _check(cu, cu.cuOccupancyMaxActiveClusters(fn, config),
                          "cuOccupancyMaxActiveClusters")
        resident = max(1, clusters) * width
    else:
        per_sm = _check(cu, cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            fn, block[0] * block[1] * block[2], smem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        device = _check(cu, cu.cuDeviceGet(index), "cuDeviceGet")
        sms = _check(cu, cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
            "cuDeviceGetAttribute(SM count)")
        resident = max(1, per_sm * sms)
    group = int(launch.get("group") or 1)
    if group > resident:
        raise RuntimeError(f"{launch['kernel_name']}: a group of {group} CTAs that wait for "
                           f"each other does not fit the {resident} CTAs resident at once on "
                           "this GPU")
    return min(int(launch["grid"][0]), resident - resident % group)


def _capability(arch: str) -> tuple[int, int]:
    digits = arch.removeprefix("sm_").rstrip("af")
    if not digits.isdigit() or len(digits) < 2:
        raise BundleError(f"gpu.arch {arch!r} is not an sm_XY arch")
    return int(digits[:-1]), int(digits[-1])


def _text(dims: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in dims.items())


# ---- the custom operator -----------------------------------------------------------------
#: the kernel each registered operator runs (the last bundle loaded under its name)
_KERNELS: dict[str, Kernel] = {}
_OPS: dict[str, Any] = {}


def _register(namespace: str, kernel: Kernel) -> Any:
    """The ``torch.library`` custom operator ``namespace::name`` of ``kernel`` (tensors
    ``t0…`` for its input buffers, optional scalars ``s0…``), registered once a process."""
    qualified = f"{namespace}::{kernel.name}"
    _KERNELS[qualified] = kernel
    if qualified in _OPS:
        return _OPS[qualified]
    n_in = len(kernel.inputs)
    params = [f"Tensor t{i}" for i in range(n_in)]
    params += [f"{'float' if s['dtype'].startswith('float') else 'SymInt'}? s{i}=None"
               for i, s in enumerate(kernel.scalars)]
    n_out = len(kernel.outputs)
    returns = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"

    def split(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        tensors = args[:n_in]
        given = list(args[n_in:]) + [None] * (len(kernel.scalars) - len(args[n_in:]))
        scalars = {s["name"]: v for s, v in zip(kernel.scalars, given, strict=True)
                   if v is not None}
        return tensors, scalars

    def impl(*args: Any) -> Any:
        current = _KERNELS[qualified]
        tensors, scalars = split(args)
        outs = current.run(tensors, scalars)
        return outs[0] if n_out == 1 else outs

    def fake(*args: Any) -> Any:
        current = _KERNELS[qualified]
        tensors, scalars = split(args)
        dims = current.fake_dims(tensors, scalars)
        outs = tuple(torch.empty(current._shape(b, dims), dtype=TORCH_DTYPES[b["dtype"]],
                                 device=tensors[0].device) for b in current.outputs)
        return outs[0] if n_out == 1 else outs

    op = torch.library.custom_op(qualified, impl, mutates_args=(),
                                 schema=f"({', '.join(params)}) -> {returns}")
    op.register_fake(fake)
    _OPS[qualified] = op
    return op




# ---- the bundle ----------------------------------------------------------------------------
class Library:
    """A loaded bundle: its family as an attribute (``lib.softmax``) and in :attr:`kernels`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        text = (path / "dispatch.json").read_text()
        info = json.loads(text)
        if info.get("format") != FORMAT or info.get("version") != VERSION:
            raise BundleError(f"{path / 'dispatch.json'} is format {info.get('format')!r} "
                              f"version {info.get('version')!r}; this loader reads {FORMAT!r} "
                              f"version {VERSION}")
        self.info = info
        namespace = "tuneforge_" + hashlib.sha256(text.encode()).hexdigest()[:12]
        kernel = Kernel(path, info, namespace)
        self.kernels: dict[str, Kernel] = {kernel.name: kernel}
        setattr(self, kernel.name, kernel)

    def __getitem__(self, name: str) -> Kernel:
        return self.kernels[name]

    def __repr__(self) -> str:
        return f"<tuneforge library {self.path}: {', '.join(self.kernels)}>"


def load(path: str | Path | None = None) -> Library:
    """The bundle at ``path`` (default: the folder this file is in)."""
    folder = Path(path) if path is not None else Path(__file__).resolve().parent
    if not (folder / "dispatch.json").is_file():
        raise BundleError(f"{folder} has no dispatch.json: not a tuneforge library bundle")
    return Library(folder)
