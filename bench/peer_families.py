"""The peers of each family: what a PyTorch user reaches for instead of a tuning service, as
builders that :mod:`bench.peers` checks and times (its docstring lists them).

- softmax: ``torch.softmax`` (the vendor), ``torch.compile``, the Triton launches of
  :func:`softmax_variants` (:mod:`bench.peer_triton`'s kernels) and ``copy``, the same bytes;
- gemm_bias_relu: cuBLAS fp32 (the vendor), three cuBLAS bf16 GEMMs composed, Triton bf16x3;
- transpose (a user's family, ``examples/transpose``: built from its spec directory by
  :func:`spec_families`): ``torch transpose`` (the vendor: ``y.copy_(x.t())``, aten's strided
  copy, what ``x.t().contiguous()`` runs), ``torch.compile`` of ``t.t().contiguous()``
  (Inductor's tiled kernel), the tiled Triton launches of :func:`transpose_variants` and
  ``copy``, the same bytes.

With a bundle of our exported library (``tuneforge library export``), :func:`library_peer`
adds ``tuneforge library`` at each shape the bundle has an entry: our kernel called through
its loader as a PyTorch program calls it, checked and timed by the same harness as the peers.

Each family's inputs (named as its input buffers), its check (against float64; the
transpose's, bit for bit), the tolerance its peers are judged at (0 for the transpose) and the
dimensions its peers read come with its peers (:data:`FAMILIES`). torch is passed in, never
imported here; the Triton module is imported when a Triton peer is built.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernels.base import Dims
from kernels.family import KernelFamily

#: the families with peers, and the name of each one's vendor peer
VENDOR_PEER = {"softmax": "torch.softmax", "gemm_bias_relu": "cuBLAS fp32",
               "transpose": "torch transpose"}
#: the longest row (columns, a power of two) the textbook Triton softmax holds in registers
ROW_BLOCK_MAX = 32768
#: the peer that is our own exported library, called through its loader (:func:`library_peer`)
LIBRARY_PEER = "tuneforge library"
#: numbers the bundle loaders imported in this process (:func:`import_loader`)
_loaders = itertools.count()
Runner = Callable[[dict[str, Any]], Callable[[], Any]]


@dataclass(frozen=True)
class Peer:
    """One peer: ``make(torch, dims)`` builds it for a shape (compiles, tunes) and returns a
    runner; ``runner(inputs)`` returns a function that runs it once on those inputs and returns
    its output (with an ``outputs`` attribute when it writes fixed tensors, poisoned before
    each check and each timed call); ``exact``: its output must equal its input (a copy)."""

    name: str
    make: Callable[[Any, Dims], Runner]
    exact: bool = False
    notes: dict[str, Any] = field(default_factory=dict)


def next_pow2(n: int) -> int:
    """The smallest power of two at least ``n`` (1 for ``n`` <= 1)."""
    return 1 << max(0, (n - 1).bit_length())


def textbook_warps(block: int) -> int:
    """The fused-softmax tutorial's warps for a row block: 4, 8 from 2048 columns, 16 from
    4096."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def softmax_variants(cols: int) -> list[tuple[str, str, int, int]]:
    """The Triton softmax launches timed at rows of ``cols``, as ``(name, kind, block,
    num_warps)``: first ``triton``, the textbook choice (the row in registers with
    :func:`textbook_warps`, or past :data:`ROW_BLOCK_MAX` columns the looped kernel in blocks
    of 4096 with 8 warps), then its neighbours (half and twice the warps; the looped kernel in
    blocks of 2048 and 8192, and beside the row kernel from 8192 columns)."""
    block = next_pow2(cols)
    loops = [("loop", 4096, 8), ("loop", 2048, 4), ("loop", 8192, 16)]
    if block <= ROW_BLOCK_MAX:
        warps = textbook_warps(block)
        plans = [("row", block, warps)]
        plans += [("row", block, w) for w in (warps // 2, warps * 2) if 1 <= w <= 32]
        if block >= 8192:
            plans.append(loops[0])
    else:
        plans = loops
    out = []
    for i, (kind, blk, warps) in enumerate(plans):
        name = "triton" if i == 0 else (f"triton row w{warps}" if kind == "row"
                                        else f"triton loop b{blk} w{warps}")
        out.append((name, kind, blk, warps))
    return out


def writes_into(key: str, bind: Callable[[Any], Callable[[Any, Any], Any]],
                transposed: bool = False) -> Callable[[Any, Dims], Runner]:
    """A peer of one input, ``key``, that writes a fixed output: ``bind(torch)`` returns the
    function ``(x, y)`` that runs it once (bound when the peer is built, outside the timed
    calls); ``y`` is allocated once per inputs, ``x``'s shape, or with ``transposed`` its
    transpose's, and is the runner's ``outputs``."""

    def make(torch: Any, dims: Dims) -> Runner:
        run = bind(torch)

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs[key]
            y = (torch.empty((x.shape[1], x.shape[0]), device=x.device, dtype=x.dtype)
                 if transposed else torch.empty_like(x))

            def once() -> Any:
                return run(x, y)

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner
    return make


def same_bytes_copy(key: str) -> Callable[[Any, Dims], Runner]:
    """The ``copy`` peer: ``y.copy_(x)`` of the input ``key`` into a fixed tensor of its shape,
    the same bytes read and written as a one-pass row or tile kernel moves (exact)."""
    return writes_into(key, lambda torch: lambda x, y: y.copy_(x))


# ---- softmax --------------------------------------------------------------------------------
def softmax_inputs(torch: Any, dims: Dims, seed: int, dist: str = "normal",
                   device: str = "cuda") -> dict[str, Any]:
    """``x`` (rows x cols fp32 on ``device``): ``normal`` N(0, 1), or ``large`` uniform in
    (-1e4, 1e4) (one entry a row carries it)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (dims["rows"], dims["cols"])
    if dist == "large":
        x = torch.rand(shape, device=device, generator=gen).mul_(2.0).sub_(1.0).mul_(1e4)
    else:
        x = torch.randn(shape, device=device, generator=gen)
    return {"x": x}


def softmax_errors(torch: Any, y: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``y`` against the float64 softmax of ``inputs["x"]``: norm-relative error, the largest
    ``|y - ref| / (ref + 1/cols)`` (the family's scaled rule) and the non-finite count."""
    x = inputs["x"]
    ref = torch.softmax(x.double(), -1)
    diff = y.double() - ref
    rel = float(diff.norm() / ref.norm())
    scaled = diff.abs_().div_(ref.add_(1.0 / x.shape[1]))
    return {"rel_err": rel, "max_scaled_err": float(scaled.max()),
            "nonfinite": int((~torch.isfinite(y)).sum())}


def softmax_peers(torch: Any, dims: Dims, compile_mode: str | None) -> list[Peer]:
    """The softmax peers at ``dims`` (the vendor first)."""

    vendor = writes_into("x", lambda torch: lambda x, y: torch.ops.aten._softmax.out(
        x, -1, False, out=y))

    def compiled(torch: Any, dims: Dims) -> Runner:
        torch._dynamo.reset()  # each shape compiled afresh: no recompile limit, no dynamic dims
        fn = torch.compile(lambda t: t.softmax(-1), dynamic=False, mode=compile_mode)

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs["x"]
            return lambda: fn(x)
        return runner

    def triton_peer(kind: str, block: int, warps: int) -> Callable[[Any, Dims], Runner]:
        def bind(torch: Any) -> Callable[[Any, Any], Any]:
            from bench import peer_triton
            return lambda x, y: peer_triton.softmax(x, y, kind, block, warps)
        return writes_into("x", bind)

    peers = [Peer("torch.softmax", vendor),
             Peer("torch.compile", compiled, notes={"mode": compile_mode or "default"})]
    peers += [Peer(name, triton_peer(kind, block, warps),
                   notes={"kind": kind, "block": block, "num_warps": warps})
              for name, kind, block, warps in softmax_variants(dims["cols"])]
    peers.append(Peer("copy", same_bytes_copy("x"), exact=True))
    return peers


# ---- the transpose --------------------------------------------------------------------------
def transpose_variants() -> list[tuple[str, int, int, int]]:
    """The Triton transpose launches timed at every shape, as ``(name, block_m, block_n,
    num_warps)``: first ``triton``, the textbook choice (32 x 32 tiles, 4 warps), then its
    neighbours ``triton bMxN wW``: the same tile with 8 warps, 64 x 64 tiles with 4 and 8, and
    the oblong 64 x 32 and 32 x 64 with 4."""
    plans = [(32, 32, 4), (32, 32, 8), (64, 64, 4), (64, 64, 8), (64, 32, 4), (32, 64, 4)]
    return [("triton" if i == 0 else f"triton b{bm}x{bn} w{warps}", bm, bn, warps)
            for i, (bm, bn, warps) in enumerate(plans)]


def transpose_inputs(torch: Any, dims: Dims, seed: int, dist: str = "normal",
                     device: str = "cuda") -> dict[str, Any]:
    """``input`` (m x n fp32 on ``device``, normal(0, 1)), named as examples/transpose's input
    buffer (its only input: ``copy``'s exact check reads the first)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return {"input": torch.randn((dims["m"], dims["n"]), device=device, generator=gen)}


def transpose_errors(torch: Any, y: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``y`` against ``inputs["input"].t()``, which it must equal bit for bit: the elements
    whose bits differ (``unequal``; a NaN, -0.0 for 0.0 among them), the norm-relative error and
    the largest absolute difference (``max_scaled_err``), both 0 when exact, and the non-finite
    count. A ``y`` that is not an n x m row-major (contiguous) tensor of the input's dtype is
    wrong everywhere (errors ``inf``): a view of the input would pass the values and time
    nothing."""
    ref = inputs["input"].t()
    nonfinite = int((~torch.isfinite(y)).sum())
    if (tuple(y.shape) != tuple(ref.shape) or y.dtype != ref.dtype
            or not y.is_contiguous()):
        return {"rel_err": math.inf, "max_scaled_err": math.inf, "nonfinite": nonfinite,
                "unequal": ref.numel(),
                "layout": [str(y.dtype), list(y.shape), list(y.stride())]}
    unequal = int((y.view(torch.int32) != ref.view(torch.int32)).sum())
    if not unequal:
        return {"rel_err": 0.0, "max_scaled_err": 0.0, "nonfinite": nonfinite, "unequal": 0}
    diff = y.double() - ref.double()
    return {"rel_err": float(diff.norm() / ref.double().norm()),
            "max_scaled_err": float(diff.abs_().max()), "nonfinite": nonfinite,
            "unequal": unequal}


def transpose_peers(torch: Any, dims: Dims, compile_mode: str | None) -> list[Peer]:
    """The transpose peers at ``dims`` (the vendor first)."""

    vendor = writes_into("input", lambda torch: lambda x, y: y.copy_(x.t()), transposed=True)

    def compiled(torch: Any, dims: Dims) -> Runner:
        torch._dynamo.reset()  # each shape compiled afresh: no recompile limit, no dynamic dims
        fn = torch.compile(lambda t: t.t().contiguous(), dynamic=False, mode=compile_mode)

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs["input"]
            return lambda: fn(x)
        return runner

    def triton_peer(block_m: int, block_n: int, warps: int) -> Callable[[Any, Dims], Runner]:
        def bind(torch: Any) -> Callable[[Any, Any], Any]:
            from bench import peer_triton
            return lambda x, y: peer_triton.transpose(x, y, block_m, block_n, warps)
        return writes_into("input", bind, transposed=True)

    peers = [Peer("torch transpose", vendor),
             Peer("torch.compile", compiled, notes={"mode": compile_mode or "default"})]
    peers += [Peer(name, triton_peer(bm, bn, warps),
                   notes={"block_m": bm, "block_n": bn, "num_warps": warps})
              for name, bm, bn, warps in transpose_variants()]
    peers.append(Peer("copy", same_bytes_copy("input"), exact=True))
    return peers


# ---- the GEMM -------------------------------------------------------------------------------
def gemm_inputs(torch: Any, dims: Dims, seed: int, dist: str = "normal",
                device: str = "cuda") -> dict[str, Any]:
    """``a`` (M x K), ``b`` (K x N), ``bias`` (N), normal, fp32 on ``device``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    m, n, k = dims["m"], dims["n"], dims["k"]
    return {"a": torch.randn(m, k, device=device, generator=gen),
            "b": torch.randn(k, n, device=device, generator=gen),
            "bias": torch.randn(n, device=device, generator=gen)}


def gemm_errors(torch: Any, y: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``y`` against relu(a @ b + bias) in float64: norm-relative error, the largest error over
    ``Σ|a·b| + |bias|`` (the family's contract) and the non-finite count."""
    a, b, bias = (inputs[k].double() for k in ("a", "b", "bias"))
    ref = torch.relu(a @ b + bias)
    scale = a.abs() @ b.abs() + bias.abs()
    diff = y.double() - ref
    rel = float(diff.norm() / ref.norm())
    return {"rel_err": rel, "max_scaled_err": float(diff.abs_().div_(scale).max()),
            "nonfinite": int((~torch.isfinite(y)).sum())}


def gemm_peers(torch: Any, dims: Dims, compile_mode: str | None) -> list[Peer]:
    """The GEMM peers at ``dims`` (the vendor first)."""

    def vendor(torch: Any, dims: Dims) -> Runner:
        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
            y = torch.empty(a.shape[0], b.shape[1], device=a.device)

            def once() -> Any:
                return torch.addmm(bias, a, b, out=y).relu_()

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    def composition(**how: bool) -> Callable[[Any, Dims], Runner]:
        def make(torch: Any, dims: Dims) -> Runner:
            from bench.gemm_speed import composition_of

            def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
                return composition_of(torch, inputs["a"], inputs["b"], inputs["bias"], **how)
            return runner
        return make

    def triton_gemm(torch: Any, dims: Dims) -> Runner:
        from bench import peer_triton

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
            y = torch.empty(a.shape[0], b.shape[1], device=a.device)

            def once() -> Any:
                return peer_triton.gemm_bf16x3(a, b, bias, y)

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    return [Peer("cuBLAS fp32", vendor), Peer("cuBLAS bf16x3", composition()),
            Peer("cuBLAS bf16x3 chained", composition(chain=True)),
            Peer("cuBLAS bf16x3 + split", composition(chain=True, split_each_call=True)),
            Peer("compiled bf16x3 + split",
                 composition(split_each_call=True, compiled=True)),
            Peer("Triton bf16x3", triton_gemm)]


@dataclass(frozen=True)
class FamilyPeers:
    """What the harness needs of a family: its inputs, its float64 check, its peers, the input
    distributions each peer is checked on, the dimensions the peers read (a family of that name
    with other dimensions is another kernel) and the tolerance its errors are judged at (None:
    the harness's own, :data:`bench.peers.TOLERANCE`)."""

    inputs: Callable[..., dict[str, Any]]
    errors: Callable[[Any, Any, dict[str, Any]], dict[str, Any]]
    peers: Callable[[Any, Dims, str | None], list[Peer]]
    check_dists: tuple[str, ...]
    dims: tuple[str, ...]
    tolerance: float | None = None


FAMILIES = {
    "softmax": FamilyPeers(softmax_inputs, softmax_errors, softmax_peers, ("normal", "large"),
                           ("rows", "cols")),
    "gemm_bias_relu": FamilyPeers(gemm_inputs, gemm_errors, gemm_peers, ("normal",),
                                  ("m", "n", "k")),
    "transpose": FamilyPeers(transpose_inputs, transpose_errors, transpose_peers, ("normal",),
                             ("m", "n"), tolerance=0.0),
}


def peers_of(name: str, family: KernelFamily) -> FamilyPeers:
    """The peers of family ``name`` (a user family's spec name, not its registry key
    ``name@hash12``), checked against ``family``: ValueError when there are none, or when the
    family's dimensions are not those the peers read (a user family of that name that is
    another kernel)."""
    if name not in FAMILIES:
        raise ValueError(f"{name!r} has no peers (families with peers: "
                         f"{', '.join(sorted(FAMILIES))})")
    peers = FAMILIES[name]
    dims = tuple(d.name for d in family.dims)
    if dims != peers.dims:
        raise ValueError(f"{name!r}: its dimensions are {', '.join(dims)}; its peers read "
                         f"{', '.join(peers.dims)}")
    return peers


def spec_families(dirs: Sequence[str | Path]) -> dict[str, KernelFamily]:
    """Each spec directory's family built and registered in this process (``kernels``'
    registry, replacing one of the same key), by its spec name; ValueError naming ``--spec``
    and the directory on a spec that cannot be built or takes a built-in's name."""
    from kernels import BUILTIN, register_family
    from kernels.userspec import build_family, load_spec_dir

    out: dict[str, KernelFamily] = {}
    for path in dirs:
        try:
            built = build_family(load_spec_dir(path))
        except ValueError as exc:
            raise ValueError(f"--spec {path}: {exc}") from exc
        if built.display_name in BUILTIN:
            raise ValueError(f"--spec {path}: {built.display_name!r} is a built-in family's name")
        out[built.display_name] = register_family(built, replace=True)
    return out


# ---- our library, through its loader --------------------------------------------------------
def check_bundles(dirs: Sequence[str | Path], names: Sequence[str]) -> dict[str, Path]:
    """Each ``--bundle`` directory by the family its dispatch table holds (read as JSON, no
    torch): ValueError naming ``--bundle`` and the directory when it is no bundle, when its
    family is not one of ``names`` (the families being timed) or when two hold one family."""
    out: dict[str, Path] = {}
    for raw in dirs:
        path = Path(raw)
        table, loader = path / "dispatch.json", path / "tuneforge_loader.py"
        if not table.is_file() or not loader.is_file():
            raise ValueError(f"--bundle {raw}: not a bundle (no dispatch.json and "
                             f"tuneforge_loader.py there: `tuneforge library export` writes one)")
        try:
            name = json.loads(table.read_text())["family"]["display_name"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"--bundle {raw}: dispatch.json names no family ({exc})") from exc
        if name not in names:
            raise ValueError(f"--bundle {raw}: its family {name!r} is not one timed here "
                             f"({', '.join(names) or 'none'})")
        if name in out:
            raise ValueError(f"--bundle {raw}: a second bundle of {name!r} (the first: "
                             f"{out[name]})")
        out[name] = path.resolve()
    return out


def import_loader(bundle: Path) -> ModuleType:
    """The ``tuneforge_loader.py`` of ``bundle`` imported as a module of its own (a name of
    its own each time: two bundles' loaders never share one)."""
    module_name = f"tuneforge_loader_{next(_loaders)}"
    spec = importlib.util.spec_from_file_location(module_name, bundle / "tuneforge_loader.py")
    if spec is None or spec.loader is None:
        raise ValueError(f"{bundle}: its tuneforge_loader.py cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_library(path: Path, name: str) -> Any:
    """The family ``name`` of the bundle at ``path``, loaded by the bundle's own loader
    (:func:`import_loader`: tuneforge's code is not used)."""
    return import_loader(path).load(path)[name]


def has_entry(kernel: Any, dims: Dims) -> bool:
    """Whether the loaded family ``kernel`` has a tuned entry at ``dims`` (else its calls run
    the fallback, which is not ours to time)."""
    return tuple(int(dims[n]) for n in kernel.dim_names) in kernel.entries


class LibraryCall:
    """One call of a loaded family on fixed inputs; ``runs`` says what such a call runs (the
    loader's ``lookup``: on another GPU, the near-tie its first call chose)."""

    def __init__(self, kernel: Any, args: list[Any]) -> None:
        self.kernel, self.args = kernel, args

    def __call__(self) -> Any:
        return self.kernel(*self.args)

    @property
    def runs(self) -> str:
        return str(self.kernel.lookup(*self.args).runs)


def library_peer(kernel: Any, bundle: Path) -> Peer:
    """``tuneforge library``: the loaded family ``kernel`` called on the family's inputs (by
    their buffer names, else in order), its output allocated by each call as a PyTorch
    program gets it."""

    def make(torch: Any, dims: Dims) -> Runner:
        names = [b["name"] for b in kernel.inputs]

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            args = ([inputs[n] for n in names] if all(n in inputs for n in names)
                    else list(inputs.values()))
            return LibraryCall(kernel, args)
        return runner
    return Peer(LIBRARY_PEER, make, notes={"bundle": str(bundle)})
