"""The kernel-family contract: candidates, transforms, rejections, launch configurations.

Pure: the standard library only. A *candidate* is a point of a family's parameter space plus the
chain of actions that led to it; a *transform* is a named, pure function from a candidate to a new
candidate or to a :class:`Rejection` that carries numbers, not only a sentence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ArgValue = int | bool

#: SMs assumed where no GPU is at hand (an H200's 132): the expert's reasoning, reports and the
#: sanitizer's launches. The evaluator passes the GPU's own count; a launch sized for another
#: count still computes the same result (stream-K's balance is all it moves).
DEFAULT_SM_COUNT = 132


@dataclass(frozen=True)
class Rejection:
    """Why a point or a transform is refused before compiling (machine-readable)."""

    reason: str
    message: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"reason", "message", **figures}``."""
        return {"reason": self.reason, "message": self.message, **dict(self.figures)}


class Dims(Mapping[str, int]):
    """Named problem dimensions in their family's order, e.g. ``m=4096, n=4096, k=4096``.

    Immutable and hashable; ``dims.m`` reads a dimension; ``str(dims)`` is the compact text
    form (``4096x4096x4096``) that datasets and caches key by.
    """

    __slots__ = ("_items",)
    _items: tuple[tuple[str, int], ...]

    def __init__(self, items: Mapping[str, int] | Iterable[tuple[str, int]] | None = None,
                 /, **named: int) -> None:
        data = dict(items or {})
        data.update(named)
        for name, value in data.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"shape.{name} must be an integer >= 1, got {value!r}")
        object.__setattr__(self, "_items", tuple(data.items()))

    def __getitem__(self, key: str) -> int:
        for name, value in self._items:
            if name == key:
                return value
        raise KeyError(key)

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        for key, value in self._items:
            if key == name:
                return value
        raise AttributeError(f"no dimension {name!r} (dimensions: "
                             f"{', '.join(k for k, _ in self._items)})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Dims is immutable")

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dims):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        return (Dims, (dict(self._items),))

    def __str__(self) -> str:
        return "x".join(str(v) for _, v in self._items)

    def __repr__(self) -> str:
        return "Dims(" + ", ".join(f"{k}={v}" for k, v in self._items) + ")"

    def as_dict(self) -> dict[str, int]:
        """``{"m": 4096, ...}`` (JSON-ready)."""
        return dict(self._items)

    def values_tuple(self) -> tuple[int, ...]:
        """The values in order."""
        return tuple(v for _, v in self._items)



@dataclass(frozen=True)
class AuxLaunch:
    """Another kernel of the same module, launched on the same stream right before the main one
    (a prologue: a GEMM's split pass, writing its operands' bf16 parts into the workspace) or
    right after it (an epilogue: a GEMM's split-K, summing the partial products in the
    workspace, adding the bias, applying ReLU).

    ``args`` names its arguments in order: a signature buffer or scalar by name,
    ``"workspace"``, or an integer literal (passed as int32). The launcher times the kernels of
    a launch as one (the user pays for all of them)."""

    kernel_name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[str | int, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kernel_name": self.kernel_name, "grid": list(self.grid),
                "block": list(self.block), "args": list(self.args)}


#: CTAs a thread-block cluster may have on every sm_90 launch; sm_90 runs up to 16, but a size
#: over this one is non-portable: the launcher must allow it on the function first
PORTABLE_CLUSTER_SIZE = 8


@dataclass(frozen=True)
class LaunchConfig:
    """How to launch a rendered kernel for one shape.

    The kernel takes its family's signature (buffers, then scalars: ``kernels.family``); with
    ``workspace_bytes`` > 0 it takes a workspace pointer after them; ``prologue`` and
    ``epilogue`` name the kernels launched before and after it. The launcher allocates the
    workspace (its contents on entry are undefined: the kernel that reads an element has it
    written by itself or by a kernel before it in the launch).
    """

    kernel_name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    #: Extra device memory the kernel needs (split-K partial sums), in bytes.
    workspace_bytes: int = 0
    epilogue: AuxLaunch | None = None
    prologue: AuxLaunch | None = None
    #: Output rows and columns one CTA computes, where the grid does not say it (a stream-K
    #: grid counts CTAs, not tiles); None: grid x and y cover the output's columns and rows.
    #: Not sent to a GPU.
    tile: tuple[int, int] | None = None
    #: CTAs of the thread-block cluster the kernel declares (``__cluster_dims__``) where the
    #: launcher must allow it first: over :data:`PORTABLE_CLUSTER_SIZE`. 1: no cluster, or a
    #: portable one the launch needs nothing for.
    cluster_size: int = 1
    #: The kernel loops over its work (a grid-stride loop) and runs best with no more CTAs
    #: than are resident at once: the launcher cuts grid x to that many (a whole number of
    #: clusters), from the driver's occupancy for this block and shared memory.
    persistent: bool = False
    #: CTAs of a persistent grid that work together through global memory and wait for each
    #: other, consecutive in grid x: the launcher keeps a whole number of them (all resident at
    #: once). 1: no such group.
    group: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``prologue``, ``epilogue``, ``cluster_size``, ``persistent`` and
        ``group`` only when set)."""
        out: dict[str, Any] = {
            "kernel_name": self.kernel_name,
            "grid": list(self.grid),
            "block": list(self.block),
            "dynamic_smem_bytes": self.dynamic_smem_bytes,
            "workspace_bytes": self.workspace_bytes,
        }
        if self.prologue is not None:
            out["prologue"] = self.prologue.to_dict()
        if self.epilogue is not None:
            out["epilogue"] = self.epilogue.to_dict()
        if self.cluster_size > 1:
            out["cluster_size"] = self.cluster_size
        if self.persistent:
            out["persistent"] = True
        if self.group > 1:
            out["group"] = self.group
        return out


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a transform and its domain."""

    name: str
    choices: tuple[ArgValue, ...]
    doc: str
    #: the parameter field this argument sets (lets a search space restrict the domain)
    field: str | None = None

    @property
    def kind(self) -> str:
        """``bool`` or ``int``."""
        return "bool" if all(isinstance(c, bool) for c in self.choices) else "int"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``tuneforge actions --json``."""
        return {
            "name": self.name, "type": self.kind, "choices": list(self.choices), "doc": self.doc
        }


@dataclass(frozen=True)
class Action:
    """A transform applied with concrete arguments, e.g. ``apply_tiling(16)``."""

    name: str
    args: tuple[ArgValue, ...] = ()

    def __str__(self) -> str:
        rendered = ", ".join(str(a).lower() if isinstance(a, bool) else str(a) for a in self.args)
        return f"{self.name}({rendered})"

    _CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$")

    @classmethod
    def parse(cls, text: str) -> Action:
        """Parse ``"apply_register_block(4, 8)"``; raises ``ValueError`` naming the problem."""
        match = cls._CALL.match(text)
        if not match:
            raise ValueError(f"cannot parse action {text!r}: expected name(arg, ...)")
        name, raw = match.group(1), match.group(2).strip()
        args: list[ArgValue] = []
        for token in [t.strip() for t in raw.split(",")] if raw else []:
            low = token.lower()
            if low in ("true", "on", "yes"):
                args.append(True)
            elif low in ("false", "off", "no"):
                args.append(False)
            elif re.fullmatch(r"[+-]?\d+", token):
                args.append(int(token))
            else:
                raise ValueError(f"action {text!r}: argument {token!r} is not an integer or bool")
        return cls(name, tuple(args))

    @staticmethod
    def parse_many(text: str) -> list[Action]:
        """Parse ``"apply_tiling(16);apply_vectorize(4)"`` (``;`` or newlines between)."""
        return [Action.parse(t) for t in re.split(r"[;\n]", text) if t.strip()]


class ParamsLike(Protocol):
    """What a family's parameter dataclass offers."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Candidate:
    """A point of the space, with the action that produced it and its parent.

    ``shape`` is the problem shape the point is tuned for, when known (a campaign's shape):
    transforms that depend on it (``specialize_shape``, the K-split limits of
    ``apply_split_k``) read it, and every transform hands it on to the point it produces.
    """

    params: Any
    action: Action | None = None
    parent: Candidate | None = None
    shape: Dims | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """Stable identity of the point: hash of its canonical parameters."""
        params = self.params.canonical() if hasattr(self.params, "canonical") else self.params
        return params_key(params.to_dict())

    def lineage(self) -> list[str]:
        """Actions from the root to this candidate."""
        chain: list[str] = []
        node: Candidate | None = self
        while node is not None and node.action is not None:
            chain.append(str(node.action))
            node = node.parent
        return list(reversed(chain))


def params_key(params: Mapping[str, Any]) -> str:
    """Short stable hash of a parameter dictionary (sorted-key JSON)."""
    blob = json.dumps(dict(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


TransformFn = Callable[..., "Candidate | Rejection"]


@dataclass(frozen=True)
class TransformSpec:
    """A named transform of the action space."""

    name: str
    args: tuple[ArgSpec, ...]
    doc: str
    fn: TransformFn
    #: ``seed`` for the eight actions of the seed text, ``expert`` for a built-in family's
    #: beyond them; a user's family: ``generated`` (a ``set_<tunable>`` made from its
    #: tunables) and ``declared`` (a transform its spec declares).
    origin: str = "seed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``tuneforge actions --json``."""
        return {
            "name": self.name,
            "args": [a.to_dict() for a in self.args],
            "doc": self.doc,
            "origin": self.origin,
        }

    def actions(self) -> Iterator[Action]:
        """Every concrete action in this transform's domain."""
        if not self.args:
            yield Action(self.name)
            return
        combos: list[tuple[ArgValue, ...]] = [()]
        for arg in self.args:
            combos = [c + (v,) for c in combos for v in arg.choices]
        for combo in combos:
            yield Action(self.name, combo)


class UnknownAction(ValueError):
    """An action name or argument outside the action space."""


class TransformRegistry:
    """Name → transform. New transforms plug in with :meth:`register`, touching nothing else."""

    def __init__(self) -> None:
        self._specs: dict[str, TransformSpec] = {}

    def register(
        self, name: str, *args: ArgSpec, origin: str = "seed"
    ) -> Callable[[TransformFn], TransformFn]:
        """Decorator: ``@registry.register("apply_tiling", ArgSpec(...))``."""

        def wrap(fn: TransformFn) -> TransformFn:
            if name in self._specs:
                raise ValueError(f"transform {name!r} is already registered")
            # the docstring's first paragraph, on one line (a sentence may wrap)
            doc = " ".join((fn.__doc__ or name).strip().split("\n\n")[0].split())
            self._specs[name] = TransformSpec(name, tuple(args), doc, fn, origin)
            return fn

        return wrap

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[TransformSpec]:
        return iter(self._specs.values())

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._specs)

    def get(self, name: str) -> TransformSpec:
        """The spec of ``name``; raises :class:`UnknownAction` naming the known ones."""
        try:
            return self._specs[name]
        except KeyError:
            known = ", ".join(self._specs)
            raise UnknownAction(f"unknown action {name!r}; known actions: {known}") from None

    def check(self, action: Action) -> None:
        """Raise :class:`UnknownAction` if the action's name or arguments are out of domain."""
        spec = self.get(action.name)
        if len(action.args) != len(spec.args):
            raise UnknownAction(
                f"{action}: {spec.name} takes {len(spec.args)} argument(s) "
                f"({', '.join(a.name for a in spec.args) or 'none'}), got {len(action.args)}"
            )
        for value, arg in zip(action.args, spec.args, strict=True):
            ok = value in arg.choices and (isinstance(value, bool) == (arg.kind == "bool"))
            if not ok:
                raise UnknownAction(
                    f"{action}: {arg.name}={value!r} is outside its domain {list(arg.choices)}"
                )

    def apply(self, candidate: Candidate, action: Action) -> Candidate | Rejection:
        """Apply one action; out-of-domain arguments raise, invalid results are rejections."""
        self.check(action)
        return self._specs[action.name].fn(candidate, *action.args)
