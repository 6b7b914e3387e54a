"""Evaluation of one candidate: compile, correctness, benchmark, profile → the record's blocks.

Two backends behind one small interface (:class:`core.evaluation.Evaluator`), generic over the
kernel family (its signature, distributions, edge shapes, metric, vendor baseline):

- :class:`GpuEvaluator` — nvcc here, then the isolated child on a real GPU;
- :class:`ReplayEvaluator` — answers from a dataset measured on a GPU (a point that was not
  measured is reported ``not_measured``, never invented).

Plain functions and dicts (no pydantic): this module also runs on GPU hosts with a lean Python.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.arch import ceiling, datasheet_gbs, theoretical_occupancy
from core.evaluation import CompileResult, EvalOptions, Evaluator, Measurement
from core.replay import ReplayDataset
from kernels.base import Dims, LaunchConfig, Rejection
from kernels.family import point_peak, reference_setup
from worker.compile import (
    Compiler,
    candidate_params,
    compile_candidate,
    reference_params,
    target_arch,
)
from worker.gpu_runner import GpuChild
from worker.launch_contract import rejudge

__all__ = [
    "SUPPORT_SOURCE", "CompileResult", "EvalOptions", "Evaluator", "GpuEvaluator",
    "Measurement", "ReplayDataset", "ReplayEvaluator", "correctness_block", "feedback_record",
    "light_profile", "measure_vendor", "perf_block", "theoretical_occupancy",
]

SUPPORT_SOURCE = Path(__file__).with_name("support.cu")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


# ---- figures that need no GPU ---------------------------------------------------------------
def distribution_names(family: Any) -> list[str]:
    """The family's input distributions by name, in its order (the rotation's order)."""
    return [d.name for d in family.distributions]


def perf_block(runs_us: Sequence[float], metric: Any, dims: Dims, *, vendor_us: float | None,
               peak: float | None, peak_source: str | None = None,
               reps: int | None = None) -> dict[str, Any]:
    """The ``perf`` block from run medians, in the family's ``metric`` (``kernels.family.
    Metric``): ``throughput`` in ``unit``, with ``throughput_tflops`` for a flops metric or
    ``throughput_gbs`` for a bytes metric, held against ``peak`` (same unit)."""
    avg = statistics.median(runs_us)
    rate = float(metric.rate(dims, avg))
    figure = round(rate, 4)
    block: dict[str, Any] = {
        "avg_us": round(avg, 3),
        "runs_us": [round(r, 3) for r in runs_us],
        "spread_pct": round(100.0 * (max(runs_us) - min(runs_us)) / avg, 3),
        "reps_per_run": reps,
        "throughput": figure,
        "unit": metric.unit,
    }
    block["throughput_tflops" if metric.kind == "flops" else "throughput_gbs"] = figure
    block.update({
        "pct_of_vendor": round(100.0 * vendor_us / avg, 2) if vendor_us else None,
        "pct_of_peak": round(100.0 * rate / peak, 2) if peak else None,
        "peak": round(peak, 3) if peak else None,
        "peak_source": peak_source,
        "vendor_us": vendor_us,
    })
    return block


def peak_for(family: Any, params: Any, device: dict[str, Any]) -> tuple[float | None, str]:
    """The ceiling the point ``params`` of ``family`` is held against on ``device``, in the
    family's unit, and where it comes from (or why there is none): the peak of its precision
    scheme (:func:`kernels.family.point_peak`)."""
    return ceiling(point_peak(family, params), device)


def correctness_block(cases: list[dict[str, Any]], tolerance: float,
                      recheck: dict[str, Any] | None = None) -> dict[str, Any]:
    """Worst figures over the cases (and the recheck after the timed launches, when there is
    one); passed only when every case and the recheck passed. A failed recheck is the reason
    when every case before the timing passed: "after timing: ..." (``recheck["after"]``)."""
    judged = [*cases, *([recheck] if recheck is not None else [])]

    def worst(key: str) -> float | None:
        values = [c[key] for c in judged if c.get(key) is not None]
        return max(values) if values else None

    failed = [c for c in judged if not c["passed"]]
    reason = None
    if failed:
        first = failed[0]
        when = f"after {first['after']}: " if first is recheck else ""
        reason = f"{when}{shape_text(first['shape'])} {first['dist']}: {first['reason']}"
    block: dict[str, Any] = {
        "passed": bool(cases) and not failed,
        "max_abs_err": worst("max_abs_err"),
        "rel_err": worst("rel_err"),
        "max_scaled_err": worst("max_scaled_err"),
        "tolerance": tolerance,
        "reason": reason,
        "cases": [{k: v for k, v in c.items() if k != "kernel_seconds"} for c in cases],
    }
    if recheck is not None:
        block["recheck"] = {k: v for k, v in recheck.items() if k != "kernel_seconds"}
    return block


def recheck_seed(checks: Sequence[dict[str, Any]], bench_seed: int | None) -> int:
    """A seed for the recheck after the timing that no input of this evaluation was drawn
    with: not a check's, not the benchmark's (inputs the kernel has seen could be cached)."""
    taken = {int(c["seed"]) for c in checks} | ({bench_seed} if bench_seed is not None else set())
    seed = (max(taken, default=0) + 1) & 0x7FFFFFFFFFFF
    while seed in taken:
        seed = (seed + 1) & 0x7FFFFFFFFFFF
    return seed


def recheck_record(reply_recheck: dict[str, Any], after: str, *, launches: int,
                   timed_us: float | None) -> dict[str, Any]:
    """The child's recheck case with what it came after: ``after`` (``timing``, ``sustained
    launches`` or ``a graph of sustained launches``), how many launches of the candidate were
    timed before it, and the time they gave it (``timed_us``: the median of the runs, or the
    sustained rate; not used for acceptance when the recheck fails)."""
    return {**reply_recheck, "after": after, "launches_before": int(launches),
            "timed_us": round(timed_us, 3) if timed_us is not None else None}


def timed_launches(bench: dict[str, Any]) -> int:
    """Launches of the candidate the benchmark timed: the warm-up and every run's reps."""
    return len(bench["warmup_us"][0]) + len(bench["samples_us"][0])


def shape_text(shape: Any) -> str:
    """``4096x4096x4096`` of a case's shape (a list of values or a dict of dimensions)."""
    values = shape.values() if isinstance(shape, dict) else shape
    return "x".join(str(v) for v in values)


def light_profile(family: Any, params: Any, compiled: CompileResult, device: dict[str, Any],
                  function: dict[str, Any] | None) -> dict[str, Any]:
    """ptxas figures and theoretical occupancy (threads per block from the family); Nsight
    figures null with their reason."""
    regs = (function or {}).get("regs_per_thread") or compiled.regs_per_thread
    smem = compiled.smem_bytes or 0
    profile: dict[str, Any] = {
        "regs_per_thread": regs,
        "max_dynamic_smem_bytes": compiled.dynamic_smem_bytes,
        "spill_bytes": compiled.spill_bytes,
        "sources": {"regs_per_thread": "cuFuncGetAttribute" if function else "ptxas",
                    "max_dynamic_smem_bytes": "launch configuration",
                    "spill_bytes": "ptxas"},
        "missing": {},
    }
    threads = int(family.threads_per_block(params))
    if regs and threads and device.get("max_regs_per_sm"):
        occ, limiter = theoretical_occupancy(threads, int(regs), smem, device)
        profile["theoretical_occupancy_pct"] = occ
        profile["limiter"] = limiter
        profile["sources"]["theoretical_occupancy_pct"] = "occupancy calculation (device limits)"
    for name in ("sm_occupancy_pct", "memory_throughput_pct", "sm_busy_pct",
                 "shared_mem_bank_conflicts"):
        profile[name] = None
        profile["missing"][name] = "profile=light: Nsight Compute not run for this candidate"
    return profile


def with_datasheet(device: dict[str, Any]) -> dict[str, Any]:
    """``device`` with ``datasheet_gbs`` added where the datasheet table knows its name."""
    sheet = datasheet_gbs(device.get("name"))
    return {**device, "datasheet_gbs": sheet} if sheet is not None else dict(device)


# ---- the GPU backend ------------------------------------------------------------------------
class GpuEvaluator:
    """Compile here, measure in an isolated child on one GPU."""

    backend = "gpu"

    def __init__(self, family: Any, compiler: Compiler, *, gpu: int | str = 0,
                 options: EvalOptions | None = None, vendor_cache: Path | None = None) -> None:
        self.family = family
        self.compiler = compiler
        #: the GPU index the child runs on (``CUDA_VISIBLE_DEVICES`` of the child)
        self.gpu = str(gpu)
        self.options = options or EvalOptions()
        self.vendor_cache = vendor_cache
        support = compiler.compile(SUPPORT_SOURCE.read_text())
        reference = compiler.compile(family.reference_source(), params=reference_params(family))
        for what, result in (("support kernels", support), ("reference kernel", reference)):
            if result.status != "ok":
                raise RuntimeError(f"cannot compile the {what}: {result.error}")
        reference_kernel = family.reference_launch(family.edge_shapes[0]).kernel_name
        style = reference_setup(family)
        self.child = GpuChild(gpu, setup={
            "op": "setup", "support_cubin": support.cubin(), "reference_cubin": reference.cubin(),
            "reference_kernel": reference_kernel, "reference_style": style["style"],
            "reference_outputs_dtype": style["outputs_dtype"],
        })
        self.device = with_datasheet(self.child.start())
        if self.device.get("arch") != compiler.arch.removesuffix("a"):
            self.child.close()
            raise RuntimeError(
                f"compiler targets {compiler.arch} but GPU {gpu} is {self.device.get('arch')}"
            )
        self._vendor: dict[str, tuple[float | None, str | None]] = {}

    def peak_for(self, params: Any) -> tuple[float | None, str]:
        """The ceiling ``params`` is held against on this GPU (:func:`peak_for`)."""
        return peak_for(self.family, params, self.device)

    def compile(self, params: Any) -> Future[CompileResult]:
        """Validate, render and compile in the pool."""
        future: Future[CompileResult] = Future()
        rejection = self.family.validate(params, self.compiler.arch)
        if rejection is not None:
            future.set_result(compile_candidate(self.compiler, self.family, params))
            return future
        return self.compiler.submit(
            self.family.render(params), entry=self.family.name,
            dynamic_smem_bytes=int(self.family.dynamic_smem_bytes(params)),
            arch=target_arch(self.family, params, self.compiler.arch),
            params=candidate_params(self.family, params))

    def _launches(self, params: Any, shapes: Iterable[Dims]) -> dict[Dims, LaunchConfig]:
        out: dict[Dims, LaunchConfig] = {}
        for shape in shapes:
            launch = self.family.launch(params, shape, sm_count=int(self.device["sm_count"]))
            if isinstance(launch, Rejection):
                raise ValueError(f"{launch.reason}: {launch.message}")
            out[shape] = launch
        return out

    def checks(self, params: Any, shape: Dims, iteration: int, seed: int, verify: bool,
               options: EvalOptions | None = None) -> list[dict[str, Any]]:
        """The correctness cases of one evaluation (seeds recorded in the cases): what the
        child takes, the resolved signature, fills and reference launch of each."""
        opts = options or self.options
        family = self.family
        dists = list(family.distributions)
        n_main = len(dists) if verify else max(1, opts.main_dists)
        edges = list(family.edge_shapes if opts.edge_shapes is None else opts.edge_shapes)
        if family.fixed_dims(params) is not None:
            # a shape-specialized kernel runs at its own shape only (its launch refuses the
            # others): every distribution there instead of the edge shapes, whose tails the
            # template's generic form was checked on
            n_main, edges = len(dists), []
        cases: list[tuple[Dims, Any]] = [
            (shape, dists[(iteration + i) % len(dists)]) for i in range(n_main)
        ]
        cases += [(edge, dists[(iteration + j + 1) % len(dists)])
                  for j, edge in enumerate(edges)]
        launches = self._launches(params, [s for s, _ in cases])
        signature = family.signature
        return [{"shape": list(s.values_tuple()), "dist": dist.name,
                 "signature": signature.resolve(s), "fills": dist.resolve(signature),
                 "launch": launches[s].to_dict(),
                 "reference_launch": family.reference_launch(s).to_dict(),
                 "rule": family.correctness.to_dict(),
                 "seed": (seed * 1_000_003 + iteration * 101 + i) & 0x7FFFFFFFFFFF}
                for i, (s, dist) in enumerate(cases)]

    def measure(self, params: Any, compiled: CompileResult, *, shape: Dims, iteration: int,
                seed: int, options: EvalOptions | None = None,
                incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """Correctness on fresh inputs, then the benchmark (interleaved with the incumbent);
        ``options`` None: the evaluator's defaults."""
        opts = options or self.options
        if compiled.status != "ok":
            raise ValueError(f"cannot measure a candidate whose compile status is "
                             f"{compiled.status}")
        family = self.family
        try:
            checks = self.checks(params, shape, iteration, seed, verify, opts)
            bench_launch = self._launches(params, [shape])[shape]
        except ValueError as exc:
            return Measurement("rejected", error=str(exc))
        request: dict[str, Any] = {
            "op": "evaluate", "tol": opts.tolerance, "checks": checks,
            "stop_on_failure": not verify,
            "candidate": {"key": compiled.source_hash, "cubin": compiled.cubin(),
                          "kernel": bench_launch.kernel_name},
            "bench": None if not opts.bench else {
                      "shape": list(shape.values_tuple()),
                      "signature": family.signature.resolve(shape),
                      "fills": family.distributions[0].resolve(family.signature),
                      "launch": bench_launch.to_dict(),
                      "seed": seed + iteration, "runs": opts.bench_runs,
                      "target_run_ms": opts.target_run_ms,
                      "max_reps": opts.max_reps, "warmup": opts.warmup},
        }
        if opts.bench:
            request["recheck"] = self.recheck_case(shape, recheck_seed(checks, seed + iteration))
        if incumbent is not None:
            inc_params, inc_compiled = incumbent
            inc_launch = self._launches(inc_params, [shape])[shape]
            request["incumbent"] = {
                "key": inc_compiled.source_hash, "cubin": inc_compiled.cubin(),
                "kernel": inc_launch.kernel_name, "launch": inc_launch.to_dict(),
            }
        start = time.perf_counter()
        reply = self.child.request(request, opts.timeout_s)
        gpu_seconds = time.perf_counter() - start
        status = reply.get("status")
        if status in ("timeout", "crashed", "launch_error", "error"):
            cases = reply.get("cases") or []
            return Measurement(
                status if status != "error" else "crashed",
                correctness=correctness_block(cases, opts.tolerance) if cases else None,
                error=reply.get("error"), gpu_seconds=gpu_seconds,
            )
        bench = reply.get("bench")
        recheck = None
        if bench is not None:
            if reply.get("recheck") is None:  # never timed without its recheck
                return Measurement("crashed", error="the evaluation child timed the candidate "
                                   "but sent no recheck", gpu_seconds=gpu_seconds)
            recheck = recheck_record(reply["recheck"], "timing",
                                     launches=timed_launches(bench),
                                     timed_us=statistics.median(bench["runs_us"][0]))
        correctness = correctness_block(reply["cases"], opts.tolerance, recheck)
        profile = light_profile(family, params, compiled, self.device, reply.get("function"))
        if not correctness["passed"]:  # a failed recheck too: the timing is not used
            return Measurement("wrong", correctness=correctness, profile=profile,
                               error=correctness["reason"], gpu_seconds=gpu_seconds)
        if bench is None:
            return Measurement("ok", correctness=correctness, profile=profile,
                               gpu_seconds=gpu_seconds)
        vendor_us = self.vendor_us(shape)
        peak, peak_source = self.peak_for(params)
        perf = perf_block(bench["runs_us"][0], family.metric, shape, vendor_us=vendor_us,
                          peak=peak, peak_source=peak_source, reps=bench["reps_per_run"])
        extra: dict[str, Any] = {}
        if vendor_us is None:
            extra["vendor_missing"] = self._vendor[str(shape)][1]
        if opts.profile == "full":
            self.full_profile(profile, compiled, shape, bench_launch)
        inc_runs = bench["runs_us"][1] if len(bench["runs_us"]) > 1 else None
        return Measurement("ok", correctness=correctness, perf=perf, profile=profile,
                           incumbent_runs_us=inc_runs, gpu_seconds=gpu_seconds, extra=extra)

    def recheck_case(self, shape: Dims, seed: int) -> dict[str, Any]:
        """The correctness case run after a candidate's timed launches, at the timed ``shape``
        with the benchmark's distribution (the family's first) and a fresh ``seed``; the child
        adds the timed launch and buffers."""
        dist = self.family.distributions[0]
        return {"seed": seed, "dist": dist.name, "fills": dist.resolve(self.family.signature),
                "reference_launch": self.family.reference_launch(shape).to_dict(),
                "rule": self.family.correctness.to_dict()}

    def sustain_request(self, params: Any, compiled: CompileResult, shape: Dims, seed: int,
                        min_ms: float) -> dict[str, Any]:
        """The child's ``sustain`` request for a compiled point at ``shape`` (two ways, each at
        least ``min_ms``), with the recheck case after them."""
        family = self.family
        launch = self._launches(params, [shape])[shape]
        return {
            "op": "sustain", "min_ms": min_ms, "seed": seed, "tol": self.options.tolerance,
            "candidate": {"key": compiled.source_hash, "cubin": compiled.cubin(),
                          "kernel": launch.kernel_name},
            "shape": list(shape.values_tuple()),
            "launch": launch.to_dict(), "signature": family.signature.resolve(shape),
            "fills": family.distributions[0].resolve(family.signature),
            "recheck": self.recheck_case(shape, recheck_seed([], seed)),
        }

    def sustained(self, params: Any, compiled: CompileResult, *, shape: Dims, seed: int = 0,
                  min_ms: float = 300.0) -> dict[str, Any]:
        """The rate of back-to-back launches of a compiled point over at least ``min_ms``: the
        faster of a loop of launches and a CUDA graph of them replayed (``us_per_launch``,
        ``launches``, ``total_ms``, ``way``; both ways under ``loop`` and ``graph``:
        :meth:`worker.gpu_child.Runtime.sustain`), and the ``recheck`` after them (the graph's
        own under ``graph``: the graph timed, replayed on the recheck case); or ``error`` when
        the child could not or either recheck failed (the rate is then not given)."""
        reply = self.child.request(self.sustain_request(params, compiled, shape, seed, min_ms),
                                   max(self.options.timeout_s, 6 * min_ms / 1000.0 + 30.0))
        if reply.get("status") != "ok":
            return {"error": f"{reply.get('status')}: {reply.get('error')}"}
        sustained = reply["sustained"]
        recheck = recheck_record(reply["recheck"], "sustained launches",
                                 launches=int(sustained["launches"]),
                                 timed_us=float(sustained["us_per_launch"]))
        if not recheck["passed"]:
            return {"error": f"wrong after sustained launches: {shape_text(recheck['shape'])} "
                             f"{recheck['dist']}: {recheck['reason']}", "recheck": recheck}
        graph = sustained.get("graph")
        if graph is not None and "recheck" in graph:
            graph["recheck"] = recheck_record(graph["recheck"], "a graph of sustained launches",
                                              launches=int(graph["launches"]),
                                              timed_us=float(graph["us_per_launch"]))
            if not graph["recheck"]["passed"]:
                failed = graph["recheck"]
                return {"error": f"wrong in the graph of sustained launches: "
                                 f"{shape_text(failed['shape'])} {failed['dist']}: "
                                 f"{failed['reason']}", "recheck": recheck, "graph": graph}
        return {**sustained, "recheck": recheck}

    def full_profile(self, profile: dict[str, Any], compiled: CompileResult, shape: Dims,
                     launch: LaunchConfig) -> None:
        """Add Nsight Compute's figures (sources ``ncu``) to a light profile, in place."""
        from worker.ncu import profile_kernel

        figures, missing = profile_kernel(compiled.cubin(), launch.kernel_name,
                                          self.family.signature.resolve(shape),
                                          launch.to_dict(), gpu=self.child.gpu)
        for name, value in figures.items():
            profile[name] = value
            profile["sources"][name] = "ncu"
            profile["missing"].pop(name, None)
        for name, why in missing.items():
            profile["missing"][name] = why

    def vendor_us(self, shape: Dims) -> float | None:
        """The family's vendor baseline at ``shape``, measured once per shape (None, with the
        reason kept, when the family has none or it cannot run)."""
        key = str(shape)
        if key not in self._vendor:
            self._vendor[key] = measure_vendor(self.family, shape, self.device,
                                               self.vendor_cache)
        return self._vendor[key][0]

    def close(self) -> None:
        """Stop the child and the compile pool."""
        self.child.close()
        self.compiler.close()


#: The vendor harness's protocol, part of every cached vendor time: ``2``, the vendor timed after
#: the child's own poison and flush kernels (``worker/vendor.py``); times cached under another
#: protocol are measured again.
VENDOR_PROTOCOL = 2


def vendor_cache_key(family: Any, shape: Dims, device: dict[str, Any]) -> str:
    """What a vendor time depends on: the family, the GPU and its driver, the shape, and the
    harness's :data:`VENDOR_PROTOCOL`."""
    return (f"{family.name}|{device.get('name')}|{device.get('driver_version')}|{shape}"
            f"|v{VENDOR_PROTOCOL}")


def measure_vendor(family: Any, shape: Dims, device: dict[str, Any], cache: Path | None
                   ) -> tuple[float | None, str | None]:
    """Time the family's vendor baseline in a short-lived process (:mod:`worker.vendor`),
    cached per family, GPU and shape: ``(microseconds, None)`` or ``(None, why)``."""
    if family.vendor is None:
        return None, f"the {family.name} family declares no vendor baseline"
    key = vendor_cache_key(family, shape, device)
    store: dict[str, Any] = {}
    if cache is not None and cache.exists():
        store = json.loads(cache.read_text())
        if key in store:
            return store[key], None
    try:
        out = subprocess.run(
            [sys.executable, "-m", "worker.vendor", "--family", family.name, str(shape)],
            capture_output=True, text=True, timeout=300, cwd=str(PROJECT_ROOT),
        )
        lines = out.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {
            "error": (out.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    value = result.get("avg_us")
    if value is None:
        return None, f"{family.vendor.name}: {result.get('error') or 'no time reported'}"
    if cache is not None:
        store[key] = value
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(store, indent=1))
    return float(value), None


# ---- the replay backend ---------------------------------------------------------------------
class ReplayEvaluator:
    """Answers from a :class:`ReplayDataset`: recorded compile figures and measurements."""

    backend = "replay"

    def __init__(self, family: Any, dataset: ReplayDataset, *, arch: str = "sm_90",
                 options: EvalOptions | None = None) -> None:
        self.family = family
        self.dataset = dataset
        dataset.use_family(family)
        self.arch = arch
        self.options = options or EvalOptions()
        device = dict(dataset.meta.get("device") or {})
        device.setdefault("name", dataset.meta.get("gpu", "unknown GPU"))
        self.device = with_datasheet(device)
        self.measured_on = dataset.provenance()[0]

    def compile(self, params: Any) -> Future[CompileResult]:
        """The recorded compile figures (a rejection is decided the same way as on a GPU)."""
        future: Future[CompileResult] = Future()
        rejection = self.family.validate(params, self.arch)
        if rejection is not None:
            data = rejection.to_dict()
            data.setdefault("max_smem_limit", self.family.max_smem_limit(self.arch))
            future.set_result(CompileResult.rejected(
                data, int(self.family.dynamic_smem_bytes(params))))
            return future
        shapes = self.dataset.shapes()
        row = None
        for shape in shapes:
            row = self.dataset.get(params.to_dict(), self.family.parse_dims(shape))
            if row is not None:
                break
        if row is None:
            future.set_result(CompileResult("not_measured", 0.0, error="this point is not in "
                                            "the replay dataset"))
            return future
        c = row["compile"]
        dynamic = int(self.family.dynamic_smem_bytes(params))
        result = CompileResult(
            status=c["status"], seconds=c.get("seconds", 0.0),
            regs_per_thread=c.get("regs_per_thread"),
            static_smem_bytes=(c.get("smem_bytes") or 0) - dynamic,
            dynamic_smem_bytes=dynamic,
            stack_bytes=c.get("stack_bytes"),
            spill_store_bytes=c.get("spill_bytes"), spill_load_bytes=0,
            error=c.get("error"), cache_hit=True, source_hash=self.family.source_hash(params),
            arch=self.arch,
        )
        future.set_result(result)
        return future

    def measure(self, params: Any, compiled: CompileResult, *, shape: Dims, iteration: int,
                seed: int, options: EvalOptions | None = None,
                incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """The recorded measurement of the point at ``shape`` (``not_measured`` if absent),
        judged at the tolerance of ``options`` (:meth:`at_tolerance`); nothing else of
        ``options`` changes a recorded answer."""
        row = self.dataset.get(params.to_dict(), shape)
        if row is None:
            return Measurement("not_measured",
                               error=f"{shape} was not measured for this point in the dataset")
        inc_runs = None
        if incumbent is not None:
            inc_row = self.dataset.get(incumbent[0].to_dict(), shape)
            if inc_row is not None and inc_row.get("perf"):
                inc_runs = list(inc_row["perf"]["runs_us"])
        m = Measurement(row["status"], correctness=row.get("correctness"),
                        perf=self.perf_of(row.get("perf"), shape, params),
                        profile=row.get("profile"),
                        error=row.get("error"), incumbent_runs_us=inc_runs,
                        gpu_seconds=float(row.get("gpu_seconds", 0.0)))
        return self.at_tolerance(m, (options or self.options).tolerance)

    def at_tolerance(self, m: Measurement, tolerance: float) -> Measurement:
        """A recorded measurement judged at ``tolerance`` rather than the one it was measured
        at, from each case's recorded error figures: a pass becomes ``wrong`` where a figure
        exceeds the tighter tolerance; a recorded failure that the looser tolerance would pass
        was never timed, so it is ``not_measured`` (no pass that did not happen), as is a row
        whose cases lack the figures."""
        block = m.correctness
        if m.status not in ("ok", "wrong") or not block or block.get("tolerance") == tolerance:
            return m
        recorded = block.get("tolerance")
        at = f"at tolerance {tolerance:g} (measured at {recorded:g})" if recorded is not None \
            else f"at tolerance {tolerance:g}"
        rule = self.family.correctness.to_dict()
        cases = [rejudge(c, tolerance, rule) for c in block.get("cases") or []]
        recheck = block.get("recheck")
        rechecked = rejudge(recheck, tolerance, rule) if recheck is not None else None
        if not cases or any(c is None for c in cases) or (recheck is not None
                                                          and rechecked is None):
            return dataclasses.replace(m, status="not_measured", perf=None, error=(
                f"cannot judge the recorded measurement {at}: its row lacks the error "
                "figures"))
        judged = correctness_block([c for c in cases if c is not None], tolerance, rechecked)
        if not judged["passed"]:
            return dataclasses.replace(m, status="wrong", correctness=judged, perf=None,
                                       error=judged["reason"], incumbent_runs_us=None)
        if m.status != "ok" or not m.perf:
            return dataclasses.replace(m, status="not_measured", correctness=judged, perf=None,
                                       incumbent_runs_us=None, error=(
                f"passes {at} on its recorded errors, but it failed when measured and was "
                "never timed"))
        return dataclasses.replace(m, correctness=judged)

    def peak_for(self, params: Any) -> tuple[float | None, str]:
        """The ceiling ``params`` is held against on the dataset's device (:func:`peak_for`)."""
        return peak_for(self.family, params, self.device)

    def perf_of(self, perf: dict[str, Any] | None, shape: Dims, params: Any
                ) -> dict[str, Any] | None:
        """A recorded perf block in the keys of :func:`perf_block` (rows recorded before the
        metric's keys existed get them from the family's metric and the dataset's device),
        held against the ceiling of ``params`` (the recording's peak may have been another)."""
        if not perf:
            return perf
        peak, peak_source = self.peak_for(params)
        block = perf_block(perf["runs_us"], self.family.metric, shape,
                           vendor_us=perf.get("vendor_us"), peak=peak,
                           peak_source=peak_source, reps=perf.get("reps_per_run"))
        recorded = {k: v for k, v in perf.items()
                    if v is not None and k not in ("peak", "peak_source", "pct_of_peak")}
        merged = {**block, **recorded}
        for key in ("throughput_tflops", "throughput_gbs"):
            if key in recorded:
                merged["throughput"] = recorded[key]
        rate = merged.get("throughput")
        merged["pct_of_peak"] = round(100.0 * rate / peak, 2) if peak and rate else None
        return merged

    def vendor_us(self, shape: Dims) -> float | None:
        """The vendor baseline's time recorded with the dataset."""
        value = (self.dataset.meta.get("vendor_us") or {}).get(str(shape))
        return float(value) if value is not None else None

    def close(self) -> None:
        """Nothing to release."""


def feedback_record(params: Any, compiled: CompileResult, m: Measurement | None, *,
                    max_smem_limit: int, device: dict[str, Any], backend: str,
                    action: str | None = None, iteration: int = 0) -> dict[str, Any]:
    """A standalone feedback record of one evaluation, validated by the schema."""
    from core.feedback import FeedbackRecord

    compile_block = compiled.summary(max_smem_limit)
    compile_status = compile_block.pop("status")
    status = compiled.failure_status or (m.status if m else "ok")
    record = FeedbackRecord.model_validate({
        "iteration": iteration, "action_taken": action, "params": params.to_dict(),
        "status": status, "compile_status": compile_status, "compile": compile_block,
        "correctness": m.correctness if m else None, "perf": m.perf if m else None,
        "profile": m.profile if m else None, "device": device, "backend": backend,
        "error": (m.error if m else None) or compiled.error,
    })
    return record.model_dump(mode="json")
