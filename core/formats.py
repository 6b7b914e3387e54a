"""Interchange formats of tuning results that other autotuners read: Kernel Tuner's cache file
and the community's T4 results format. Pure functions over plain rows.

A *row* is one evaluated point::

    {"params": {name: value}, "status": "ok" | "rejected" | "compile_error" | ...,
     "perf": {"avg_us", "runs_us", "throughput", "unit": "TFLOP/s" | "GB/s"} | None,
     "compile": {"seconds"} | None, "gpu_seconds": float, "timestamp": ISO 8601 | None}

Kernel Tuner's cache (``kernel_tuner/util.py``: ``process_cache``/``read_cache``; schema
``kernel_tuner/schema/cache/1.0.0``) is one JSON object keyed by the comma-joined parameter values
in ``tune_params_keys`` order; times are in milliseconds, booleans are written 0/1 (Kernel Tuner
treats parameters as numbers), and a configuration that did not run has the name of its error
class as its ``time`` (``InvalidConfig``, ``CompilationFailedConfig``, ``RuntimeFailedConfig``).

T4 (``kernel_tuner/schema/T4/1.0.0/results-schema.json``, "Open Autotuning Results Schema",
written by Kernel Tuner's ``store_output_file`` and read by the autotuning-methodology tools) is
``{"schema_version": "1.0.0", "results": [...]}``, one result per evaluated configuration with
``timestamp``, ``configuration``, ``objectives``, ``times`` (``compilation``, ``benchmark``,
``framework``, ``search_algorithm``, ``validation`` in ms, ``runtimes``: the timed runs in ms),
``invalidity`` (``correct`` | ``compile`` | ``runtime`` | ``correctness`` | ``constraints`` |
``timeout``), ``correctness`` (1 or 0) and ``measurements`` (``name``/``value``/``unit``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

KT_CACHE_SCHEMA_VERSION = "1.0.0"
T4_SCHEMA_VERSION = "1.0.0"

#: tuneforge's final statuses as Kernel Tuner's error classes (``None``: measured).
KT_ERROR = {"ok": None, "rejected": "InvalidConfig", "compile_error": "CompilationFailedConfig",
            "compile_timeout": "CompilationFailedConfig"}
#: tuneforge's final statuses as T4's ``invalidity``.
T4_INVALIDITY = {"ok": "correct", "rejected": "constraints", "compile_error": "compile",
                 "compile_timeout": "timeout", "timeout": "timeout", "wrong": "correctness",
                 "crashed": "runtime", "launch_error": "runtime", "not_measured": "runtime"}


def kt_value(value: Any) -> Any:
    """A parameter value as Kernel Tuner stores it (booleans as 0/1)."""
    return int(value) if isinstance(value, bool) else value


def tune_param_keys(rows: Sequence[Mapping[str, Any]], domains: Mapping[str, Sequence[Any]]
                    ) -> list[str]:
    """The parameters of ``domains`` that appear in the rows, in the domains' order."""
    return [k for k in domains if any(k in r["params"] for r in rows)]


def kt_cache(rows: Iterable[Mapping[str, Any]], *, domains: Mapping[str, Sequence[Any]],
             device_name: str, kernel_name: str, problem_size: Sequence[int],
             defaults: Mapping[str, Any] | None = None, timestamp: str | None = None
             ) -> dict[str, Any]:
    """A Kernel Tuner cache of the rows; every row is one entry (a failed one keeps its error
    class as ``time``). ``defaults`` fill parameters a row lacks; ``timestamp`` stands in for
    rows without one."""
    rows = list(rows)
    keys = tune_param_keys(rows, domains)
    defaults = defaults or {}
    cache: dict[str, Any] = {}
    for row in rows:
        values = [kt_value(row["params"].get(k, defaults.get(k))) for k in keys]
        entry: dict[str, Any] = dict(zip(keys, values, strict=True))
        perf = row.get("perf") or {}
        status = row["status"]
        measured = status == "ok" and bool(perf)
        entry.update({
            "time": perf["avg_us"] / 1000.0 if measured
            else KT_ERROR.get(status) or "RuntimeFailedConfig",
            "times": [r / 1000.0 for r in perf.get("runs_us") or []] if measured else [],
            "compile_time": 1000.0 * float((row.get("compile") or {}).get("seconds") or 0.0),
            "verification_time": 0.0,
            "benchmark_time": 1000.0 * float(row.get("gpu_seconds") or 0.0),
            "strategy_time": 0.0,
            "framework_time": 0.0,
            "timestamp": row.get("timestamp") or timestamp or "",
        })
        if measured:
            entry.update([throughput_measure(perf)])
        cache[",".join(str(v) for v in values)] = entry
    return {
        "schema_version": KT_CACHE_SCHEMA_VERSION,
        "device_name": device_name,
        "kernel_name": kernel_name,
        "problem_size": list(problem_size),
        "tune_params_keys": keys,
        "tune_params": {k: [kt_value(v) for v in domains[k]] for k in keys},
        "objective": "time",
        "objective_higher_is_better": False,
        "cache": cache,  # last: Kernel Tuner reopens a cache by its closing "}}}"
    }


def throughput_measure(perf: Mapping[str, Any]) -> tuple[str, float]:
    """The throughput as Kernel Tuner names it: ``("GFLOP/s", …)`` of a flops metric (TFLOP/s
    × 1000), ``("GB/s", …)`` of a bytes metric."""
    # rows recorded before the family contract carry the GEMM's throughput_tflops only
    value = float(perf.get("throughput", perf.get("throughput_tflops")))
    if perf.get("unit", "TFLOP/s") == "TFLOP/s":
        return "GFLOP/s", value * 1000.0
    return str(perf["unit"]), value


def kt_cache_text(data: Mapping[str, Any]) -> str:
    """The cache as Kernel Tuner writes it: compact JSON ending in ``}}}``, which its reader
    takes for a closed file (any other ending is "reopened" by appending brackets)."""
    return json.dumps(data, separators=(",", ":"))


def t4_results(rows: Iterable[Mapping[str, Any]], *, objective: str = "time",
               extra_measurements: Sequence[str] = ()) -> dict[str, Any]:
    """A T4 results document of the rows, in their order.

    ``measurements`` hold ``time`` (ms, the median of the runs) and the throughput
    (:func:`throughput_measure`) of measured rows, plus any ``extra_measurements`` a row
    carries under those names (unit-less)."""
    results = []
    for row in rows:
        perf = row.get("perf") or {}
        status = row["status"]
        measured = status == "ok" and bool(perf)
        measurements: list[dict[str, Any]] = []
        if measured:
            measurements += [
                {"name": "time", "value": perf["avg_us"] / 1000.0, "unit": "ms"},
                {"name": throughput_measure(perf)[0], "value": throughput_measure(perf)[1],
                 "unit": throughput_measure(perf)[0]},
            ]
        measurements += [{"name": name, "value": row[name], "unit": ""}
                         for name in extra_measurements if row.get(name) is not None]
        results.append({
            "timestamp": row.get("timestamp") or "",
            "configuration": dict(row["params"]),
            "objectives": [objective],
            "times": {
                "compilation": 1000.0 * float((row.get("compile") or {}).get("seconds") or 0.0),
                "benchmark": 1000.0 * float(row.get("gpu_seconds") or 0.0),
                "framework": 0.0,
                "search_algorithm": 0.0,
                "validation": 0.0,
                "runtimes": [r / 1000.0 for r in perf.get("runs_us") or []] if measured else [],
            },
            "invalidity": T4_INVALIDITY.get(status, "runtime"),
            "correctness": 1 if measured else 0,
            "measurements": measurements,
        })
    return {"schema_version": T4_SCHEMA_VERSION, "results": results}
