"""Export bundles for the bundle tests: built from the replay datasets' best points (the
session compiler's cache makes a second build free), and the bundle's own loader imported."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repo import ROOT

from agent.bundle import BundleEntry, replay_entries, write_bundle
from bench.peer_families import import_loader
from kernels.base import Dims
from kernels.userspec import build_family, load_spec_dir
from worker.compile import Compiler

EXAMPLE = ROOT / "examples" / "transpose"
PROVENANCE = {"exported": "by the tests", "commit": "test"}
__all__ = ["EXAMPLE", "PROVENANCE", "build", "import_loader", "transpose_entries",
           "transpose_family"]


def build(compiler: Compiler, out: Path, family: Any, shapes: Iterable[str] | None = None,
          extra: Iterable[BundleEntry] = ()) -> Path:
    """A bundle of ``family``'s replay bests at ``shapes`` (all of them by default), for an
    H200, plus ``extra`` entries."""
    wanted = set(shapes) if shapes is not None else None
    entries = [e for e in (replay_entries(family) if wanted != set() else [])
               if wanted is None or str(e.shape) in wanted]
    return write_bundle(out, family, [*entries, *extra], compiler=compiler, arch="sm_90",
                        sm_count=132, gpu_name="NVIDIA H200", provenance=PROVENANCE)


def transpose_family() -> Any:
    """``examples/transpose``: a user family declared without Python, whose fallback is its
    reference kernel."""
    return build_family(load_spec_dir(EXAMPLE))


def transpose_entries(family: Any, shapes: Iterable[tuple[int, int]]) -> list[BundleEntry]:
    """The family's baseline at each shape (``tuned``, no figures)."""
    return [BundleEntry(Dims(m=m, n=n), family.baseline, source="tuned",
                        provenance={"campaign": "test"}) for m, n in shapes]
