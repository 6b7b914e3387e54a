"""The types every layer shares about an evaluation: a compile's result, a measurement, the
options it is taken with, and the :class:`Evaluator` protocol its backends implement (the GPU's
in ``worker/evaluate.py``, the replay's there too). Pure data: the standard library and
``kernels.base`` only, so the agent, the API and the CLI import them without a GPU stack."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kernels.base import Dims
from kernels.family import DEFAULT_TOLERANCE


@dataclass
class CompileResult:
    """What one compile produced. ``status`` is ``ok|error|timeout``; ``not_measured`` is a
    replay's point outside its dataset (nothing recorded, so nothing to compile); ``rejected`` is
    decided before compiling and built by the caller with :meth:`rejected`."""

    status: str
    seconds: float
    regs_per_thread: int | None = None
    static_smem_bytes: int | None = None
    dynamic_smem_bytes: int = 0
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    error: str | None = None
    cache_hit: bool = False
    source_hash: str = ""
    cubin_path: str | None = None
    arch: str = ""
    nvcc_version: str = ""
    flags: list[str] = field(default_factory=list)
    log: str = ""
    rejection: dict[str, Any] | None = None

    @property
    def smem_bytes(self) -> int | None:
        """Static plus dynamic shared memory per block."""
        if self.static_smem_bytes is None:
            return self.dynamic_smem_bytes if self.status == "rejected" else None
        return self.static_smem_bytes + self.dynamic_smem_bytes

    @property
    def failure_status(self) -> str | None:
        """The candidate's final status when the compile did not give a cubin (else None)."""
        if self.status == "ok":
            return None
        return {"timeout": "compile_timeout", "rejected": "rejected",
                "not_measured": "not_measured"}.get(self.status, "compile_error")

    @property
    def spill_bytes(self) -> int | None:
        """Spill stores plus spill loads."""
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return None
        return self.spill_store_bytes + self.spill_load_bytes

    def cubin(self) -> bytes:
        """The compiled cubin (only when ``status == "ok"``)."""
        if self.status != "ok" or not self.cubin_path:
            raise RuntimeError(f"no cubin: compile status is {self.status}")
        return Path(self.cubin_path).read_bytes()

    def summary(self, max_smem_limit: int) -> dict[str, Any]:
        """The ``compile`` block of the feedback record."""
        return {
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "regs_per_thread": self.regs_per_thread,
            "smem_bytes": self.smem_bytes,
            "spill_bytes": self.spill_bytes,
            "stack_bytes": self.stack_bytes,
            "max_smem_limit": max_smem_limit,
            "error": self.error,
            "cache_hit": self.cache_hit,
            "rejection": self.rejection,
        }

    @classmethod
    def rejected(cls, rejection: dict[str, Any], dynamic_smem_bytes: int = 0) -> CompileResult:
        """A point refused before compiling."""
        return cls(status="rejected", seconds=0.0, error=rejection.get("message"),
                   rejection=rejection, dynamic_smem_bytes=dynamic_smem_bytes)


#: The version of the evaluation protocol (what a measurement's figures mean: its checks, its
#: timing, its recheck); part of every evaluation's key, raised when the protocol changes.
PROTOCOL_VERSION = 1


def evaluation_key(*, contract: str, compiled: CompileResult, shape: str, backend: str,
                   device: dict[str, Any] | None, tolerance: float, profile: str) -> str:
    """What identifies an evaluation: the family's contract (:func:`kernels.family.
    contract_hash`), the compiled kernel (its source hash, nvcc version, arch and flags), the
    shape, the backend, the GPU model and driver, the correctness
    tolerance, the profile and :data:`PROTOCOL_VERSION`. Two requests with the same key get
    the same answer, so the second is served from the first."""
    device = device or {}
    blob = json.dumps([
        PROTOCOL_VERSION, contract, compiled.source_hash, compiled.nvcc_version,
        compiled.arch, list(compiled.flags), shape, backend,
        device.get("name"), device.get("driver_version"), float(tolerance), profile,
    ], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class EvalOptions:
    """How a candidate is judged and timed (passed per call: ``Evaluator.measure(...,
    options=...)``)."""

    tolerance: float = DEFAULT_TOLERANCE
    #: small shapes checked besides the campaign's; None: the family's ``edge_shapes``
    edge_shapes: Sequence[Dims] | None = None
    #: distributions checked at the campaign shape; by default one per candidate, rotating with
    #: the iteration, while the edge shapes take the others (``verify`` checks all of them).
    main_dists: int = 1
    bench_runs: int = 3
    target_run_ms: float = 25.0
    max_reps: int = 50
    warmup: int = 1
    timeout_s: float = 60.0
    profile: str = "light"
    #: False: correctness only (no benchmark).
    bench: bool = True


@dataclass
class Measurement:
    """The measured blocks of a feedback record (dicts shaped like :mod:`core.feedback`)."""

    status: str
    correctness: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    error: str | None = None
    #: interleaved runs of the incumbent measured in the same request, when one was given.
    incumbent_runs_us: list[float] | None = None
    gpu_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``params_key`` of the incumbent whose runs are ``incumbent_runs_us``
    incumbent_key: str | None = None
    #: the candidate this measurement was served from (the team's history: no GPU time)
    served_from: str | None = None


class Evaluator(Protocol):
    """What the campaign engine needs from a backend."""

    backend: str
    device: dict[str, Any]
    #: the defaults a ``measure`` without ``options`` uses
    options: EvalOptions

    def compile(self, params: Any) -> Future[CompileResult]:
        """Start compiling ``params`` (a replay answers at once)."""
        ...

    def measure(self, params: Any, compiled: CompileResult, *, shape: Dims, iteration: int,
                seed: int, options: EvalOptions | None = None,
                incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """Correctness, benchmark and profile of a compiled point (``options`` None: the
        evaluator's defaults)."""
        ...

    def vendor_us(self, shape: Dims) -> float | None:
        """The vendor baseline's time at ``shape`` on this device (None when it cannot be
        had)."""
        ...

    def close(self) -> None:
        """Release processes and pools."""
        ...
