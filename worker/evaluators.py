"""The one place evaluators are built: a GPU worker's (``worker/jobs.py``), embedded mode's and
``tuneforge evaluate``'s (``cli/tune.py``), the benchmarks'.

Every evaluator gets the same defaults from the settings (the evaluation watchdog
``TUNEFORGE_EVAL_TIMEOUT_S``, the vendor-time cache under ``TUNEFORGE_HOME``); what a campaign
sets (tolerance, profile) travels with each request (``Evaluator.measure(..., options=...)``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from core.evaluation import EvalOptions, Evaluator
from core.replay import ReplayDataset
from worker.compile import Compiler, compiler_from_settings


class BackendUnavailable(RuntimeError):
    """The backend asked for cannot run here (the message says why and what to do)."""


def default_options(settings: Any, **changes: Any) -> EvalOptions:
    """The evaluation options every evaluator starts from: the settings' watchdog."""
    return dataclasses.replace(EvalOptions(timeout_s=float(settings.eval_timeout_s)), **changes)


def replay_evaluator(family: Any, settings: Any, dataset: ReplayDataset | None = None
                     ) -> Evaluator:
    """The replay of ``dataset`` (default: the family's first shipped dataset)."""
    from worker.evaluate import ReplayEvaluator

    if dataset is None:
        datasets = family.replay_datasets()
        if not datasets:
            raise BackendUnavailable(f"the {family.name} family ships no replay dataset")
        dataset = ReplayDataset(datasets[0])
    return ReplayEvaluator(family, dataset, arch=settings.arch,
                           options=default_options(settings))


def gpu_evaluator(family: Any, settings: Any, *, gpu: str = "0",
                  compiler: Compiler | None = None) -> Evaluator:
    """The isolated evaluation child of ``family`` on GPU ``gpu`` (``RuntimeError``,
    ``OSError`` or ``ChildUnavailable`` when it cannot start)."""
    from worker.evaluate import GpuEvaluator

    return GpuEvaluator(family, compiler or compiler_from_settings(settings), gpu=gpu,
                        options=default_options(settings),
                        vendor_cache=settings.home / "vendor.json")


@dataclass
class LocalEvaluators:
    """Evaluators of one process, one per GPU (or one replay)."""

    evaluators: list[Evaluator]
    #: ``gpu`` or ``replay``
    backend: str
    #: why the GPU was not used, when it was not
    why_not_gpu: str | None = None

    def close(self) -> None:
        """Stop every evaluation child."""
        for ev in self.evaluators:
            ev.close()


def open_local(backend: str, family: Any, settings: Any, gpus: list[str]) -> LocalEvaluators:
    """Evaluators for ``backend`` on this host: ``gpu`` (one per index of ``gpus``),
    ``replay``, or ``auto`` (the GPUs if pycuda finds one, else the replay).
    :class:`BackendUnavailable` says why none can run."""
    why_not_gpu = None
    if backend in ("auto", "gpu"):
        from worker.gpu_runner import ChildUnavailable

        try:
            compiler = compiler_from_settings(settings)
            return LocalEvaluators([gpu_evaluator(family, settings, gpu=g, compiler=compiler)
                                    for g in gpus], "gpu")
        except (ChildUnavailable, RuntimeError, OSError) as exc:
            why_not_gpu = str(exc).splitlines()[0][:200]
            if backend == "gpu":
                raise BackendUnavailable(f"--backend gpu: {why_not_gpu}") from None
    try:
        return LocalEvaluators([replay_evaluator(family, settings)], "replay", why_not_gpu)
    except BackendUnavailable as exc:
        raise BackendUnavailable(
            f"--backend replay: {exc} (no GPU here: {why_not_gpu or 'replay asked for'})"
        ) from None
