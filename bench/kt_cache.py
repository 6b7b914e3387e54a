"""Export a tuneforge replay dataset as a Kernel Tuner cache file, and run Kernel Tuner on it.

Kernel Tuner's simulation mode (``kernel_tuner.tune_cache``, ``simulation_mode=True``) reads the
measurements from a cache file and never touches a GPU, so its strategies can be compared with
tuneforge's policies on the very same measurements. The cache format (``kernel_tuner/util.py``,
``process_cache``) is one JSON object::

    {"device_name": ..., "kernel_name": ..., "problem_size": [M, N, K],
     "tune_params_keys": [names in order], "tune_params": {name: [values]}, "objective": "time",
     "cache": {"v1,v2,...": {name: value, ..., "time": ms, "times": [ms, ...],
                             "compile_time": ms, "verification_time": ms,
                             "benchmark_time": ms, ...}}}

keyed by the comma-joined parameter values in ``tune_params_keys`` order. Booleans are written
as 0/1 (Kernel Tuner treats parameters as numbers). Only the measured points are in the cache;
``tune_cache`` infers from them the restriction that keeps a strategy inside the dataset.

The cache of the shipped H200 dataset:

    python -m bench.kt_cache OUT.json
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Kernel Tuner strategies that run offline on a cache (the others need extra packages or a
#: time budget in simulated time only).
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "bayes_opt", "simulated_annealing",
                 "greedy_ils", "mls", "pso", "firefly_algorithm", "diff_evo", "basinhopping",
                 "dual_annealing")


def export_kt_cache(dataset: Any, shape: str, path: Path, *, kernel_name: str = "gemm_bias_relu"
                    ) -> dict[str, Any]:
    """Write the measurements of ``dataset`` at ``shape`` as a Kernel Tuner cache file.

    Failed points keep the name of Kernel Tuner's error class as their ``time``, the way Kernel
    Tuner records a configuration that did not run (:func:`core.formats.kt_cache`, shared with
    ``tuneforge export --format kt``). Returns the cache dict.
    """
    from core.formats import kt_cache, kt_cache_text

    rows = [{**r, "timestamp": dataset.meta.get("date")}
            for (_key, s), r in dataset.points.items() if s == shape]
    if not rows:
        raise ValueError(f"the dataset has no measurement at {shape}")
    data = kt_cache(rows, domains=dataset.meta.get("domains") or {},
                    device_name=dataset.meta.get("gpu", "unknown GPU"), kernel_name=kernel_name,
                    problem_size=[int(x) for x in shape.split("x")])
    path.write_text(kt_cache_text(data))
    return data


@contextlib.contextmanager
def _seeded_lhs(seed: int) -> Iterator[None]:
    """Make scipy's ``LatinHypercube`` draw from a generator seeded with ``seed``.

    Kernel Tuner's bayes_opt (initial sample) and diff_evo (``Searchspace.get_LHS_sample``)
    build ``LatinHypercube(d)`` without a generator, so it takes fresh OS entropy and the
    same seed gave a different run each time (seeding ``random``/``np.random`` does not reach
    it). One generator per run, shared by its successive samplers."""
    import numpy as np
    import scipy.stats.qmc as qmc
    from kernel_tuner.strategies import bayes_opt

    original = qmc.LatinHypercube
    rng = np.random.default_rng(seed)

    def seeded(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("rng") is None and kwargs.get("seed") is None:
            kwargs.pop("seed", None)
            kwargs["rng"] = rng
        return original(*args, **kwargs)

    saved = bayes_opt.LatinHypercube  # imported by name at its import
    qmc.LatinHypercube = seeded
    bayes_opt.LatinHypercube = seeded
    try:
        yield
    finally:
        qmc.LatinHypercube = original
        bayes_opt.LatinHypercube = saved


def run_kt(cache_path: Path, strategy: str, seed: int, max_fevals: int) -> dict[str, Any]:
    """One Kernel Tuner run in simulation mode: the unique configurations in the order the
    strategy evaluated them (times in ms), and the wall seconds at each."""
    import importlib
    import warnings

    import numpy as np
    import scipy.stats  # noqa: F401  (its first import draws from ``random``: before the seed)
    from kernel_tuner import tune_cache

    importlib.import_module(f"kernel_tuner.strategies.{strategy}")  # the same, if it imports any
    start = time.perf_counter()
    with warnings.catch_warnings(), _seeded_lhs(seed):
        warnings.simplefilter("ignore")
        random.seed(seed)
        np.random.seed(seed)  # Kernel Tuner's strategies draw from the global generators
        results, _env = tune_cache(str(cache_path), strategy=strategy, quiet=True,
                                   verbose=False,
                                   strategy_options={"max_fevals": max_fevals})
    wall = time.perf_counter() - start
    keys = json.loads(Path(cache_path).read_text())["tune_params_keys"]
    order: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for r in results:
        config = tuple(r[k] for k in keys)
        if config in seen:
            continue
        seen.add(config)
        t = r.get("time")
        order.append({"config": config,
                      "time_ms": t if isinstance(t, float | int) and "__error__" not in r
                      else None,
                      "benchmark_ms": float(r.get("benchmark_time") or 0.0)})
    return {"strategy": strategy, "seed": seed, "evaluations": order, "wall_s": wall}


def main() -> None:
    """Write the cache of the shipped replay dataset to the path given."""
    from core.replay import ReplayDataset
    from kernels import get_family

    family = get_family("gemm_bias_relu")
    dataset = ReplayDataset(family.replay_datasets()[0]).complete_space()
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "kt-cache-h200-4096.json")
    data = export_kt_cache(dataset, dataset.shapes()[0], out)
    print(f"{out}: {len(data['cache'])} configurations of {data['tune_params_keys']}")


if __name__ == "__main__":
    main()
