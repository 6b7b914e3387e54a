"""Evaluation of one candidate: compile, correctness, benchmark, profile → the record's blocks.

Two backends behind one small interface (:class:`Evaluator`):

- :class:`GpuEvaluator` — nvcc here, then the isolated child on a real GPU;
- :class:`ReplayEvaluator` — answers from a dataset measured on a GPU (a point that was not
  measured is reported ``not_measured``, never invented).

Plain functions and dicts (no pydantic): this module also runs on GPU hosts with a lean Python.
"""

from __future__ import annotations

import gzip
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kernels.base import LaunchConfig, Rejection, Shape, params_key
from worker.compile import Compiler, CompileResult, compile_candidate, target_arch
from worker.gpu_runner import GpuChild

SUPPORT_SOURCE = Path(__file__).with_name("support.cu")

#: Small shapes every candidate is checked on besides the campaign's: 1x1x1, primes, N % 4 != 0,
#: K not a multiple of any tile.
EDGE_SHAPES: tuple[Shape, ...] = (
    Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(1000, 1002, 999),
)
DISTRIBUTIONS = ("normal", "uniform", "mixed")

#: FP32 lanes per SM by compute capability major.minor (for the FP32 FMA peak).
FP32_LANES = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128,
              "9.0": 128, "10.0": 128, "12.0": 128}


@dataclass
class EvalOptions:
    """How a candidate is judged and timed."""

    tolerance: float = 1e-4
    edge_shapes: Sequence[Shape] = EDGE_SHAPES
    #: distributions checked at the campaign shape; by default one per candidate, rotating with
    #: the iteration, while the edge shapes take the others (``verify`` checks all three).
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


class Evaluator(Protocol):
    """What the campaign engine needs from a backend."""

    backend: str
    device: dict[str, Any]

    def compile(self, params: Any) -> Future[CompileResult]:
        """Start compiling ``params`` (a replay answers at once)."""
        ...

    def measure(self, params: Any, compiled: CompileResult, *, shape: Shape, iteration: int,
                seed: int, incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """Correctness, benchmark and profile of a compiled point."""
        ...

    def vendor_us(self, shape: Shape) -> float | None:
        """cuBLAS fp32 time for ``shape`` on this device (None when it cannot be had)."""
        ...

    def close(self) -> None:
        """Release processes and pools."""
        ...


# ---- figures that need no GPU ---------------------------------------------------------------
def fp32_peak_tflops(device: dict[str, Any]) -> float | None:
    """FP32 FMA peak of the device from its SM count and boost clock."""
    lanes = FP32_LANES.get(str(device.get("compute_capability")))
    if not lanes or not device.get("sm_count") or not device.get("clock_khz"):
        return None
    return float(device["sm_count"] * lanes * 2 * device["clock_khz"] * 1e3 / 1e12)


def theoretical_occupancy(threads: int, regs: int, smem_bytes: int,
                          device: dict[str, Any]) -> tuple[float, str]:
    """Theoretical occupancy (% of the SM's warps) and the resource that limits it."""
    warps = -(-threads // 32)
    max_warps = device.get("max_threads_per_sm", 2048) // 32
    regs_per_warp = -(-max(regs, 1) * 32 // 256) * 256
    warps_by_regs = device.get("max_regs_per_sm", 65536) // regs_per_warp
    limits = {  # on a tie the first named is reported: threads before resources
        "threads": device.get("max_threads_per_sm", 2048) // threads,
        "blocks": device.get("max_blocks_per_sm", 32),
        "registers": warps_by_regs // warps,
    }
    if smem_bytes > 0:
        limits["shared_memory"] = device.get("max_smem_per_sm", 233472) // (smem_bytes + 1024)
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return round(100.0 * blocks * warps / max_warps, 1), limiter


def perf_block(runs_us: Sequence[float], flops: int, *, vendor_us: float | None,
               peak_tflops: float | None, reps: int | None = None) -> dict[str, Any]:
    """The ``perf`` block from run medians."""
    avg = statistics.median(runs_us)
    tflops = flops / (avg * 1e-6) / 1e12
    return {
        "avg_us": round(avg, 3),
        "runs_us": [round(r, 3) for r in runs_us],
        "spread_pct": round(100.0 * (max(runs_us) - min(runs_us)) / avg, 3),
        "reps_per_run": reps,
        "throughput_tflops": round(tflops, 4),
        "pct_of_vendor": round(100.0 * vendor_us / avg, 2) if vendor_us else None,
        "pct_of_peak": round(100.0 * tflops / peak_tflops, 2) if peak_tflops else None,
        "vendor_us": vendor_us,
    }


def correctness_block(cases: list[dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """Worst figures over the cases."""
    def worst(key: str) -> float | None:
        values = [c[key] for c in cases if c.get(key) is not None]
        return max(values) if values else None

    failed = [c for c in cases if not c["passed"]]
    return {
        "passed": bool(cases) and not failed,
        "max_abs_err": worst("max_abs_err"),
        "rel_err": worst("rel_err"),
        "max_scaled_err": worst("max_scaled_err"),
        "tolerance": tolerance,
        "reason": (f"{'x'.join(map(str, failed[0]['shape']))} {failed[0]['dist']}: "
                   f"{failed[0]['reason']}") if failed else None,
        "cases": [{k: v for k, v in c.items() if k != "kernel_seconds"} for c in cases],
    }


def light_profile(params: Any, compiled: CompileResult, device: dict[str, Any],
                  function: dict[str, Any] | None) -> dict[str, Any]:
    """ptxas figures and theoretical occupancy; Nsight figures null with their reason."""
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
    threads = int(getattr(params, "threads", 0))
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


# ---- the GPU backend ------------------------------------------------------------------------
class GpuEvaluator:
    """Compile here, measure in an isolated child on one GPU."""

    backend = "gpu"

    def __init__(self, family: Any, compiler: Compiler, *, gpu: int | str = 0,
                 options: EvalOptions | None = None, vendor_cache: Path | None = None) -> None:
        self.family = family
        self.compiler = compiler
        self.options = options or EvalOptions()
        self.vendor_cache = vendor_cache
        support = compiler.compile(SUPPORT_SOURCE.read_text())
        reference = compiler.compile(family.reference_source())
        for what, result in (("support kernels", support), ("reference kernel", reference)):
            if result.status != "ok":
                raise RuntimeError(f"cannot compile the {what}: {result.error}")
        ref_launch = family.reference_launch(Shape(64, 64, 1))
        self.child = GpuChild(gpu, setup={
            "op": "setup", "support_cubin": support.cubin(), "reference_cubin": reference.cubin(),
            "reference_kernel": ref_launch.kernel_name, "reference_block": ref_launch.block,
            "reference_tile": 64,
        })
        self.device = self.child.start()
        if self.device.get("arch") != compiler.arch.removesuffix("a"):
            self.child.close()
            raise RuntimeError(
                f"compiler targets {compiler.arch} but GPU {gpu} is {self.device.get('arch')}"
            )
        self.peak_tflops = fp32_peak_tflops(self.device)
        self._vendor: dict[str, float | None] = {}

    def compile(self, params: Any) -> Future[CompileResult]:
        """Validate, render and compile in the pool."""
        future: Future[CompileResult] = Future()
        rejection = self.family.validate(params, self.compiler.arch)
        if rejection is not None:
            future.set_result(compile_candidate(self.compiler, self.family, params))
            return future
        return self.compiler.submit(self.family.render(params), entry=self.family.name,
                                    dynamic_smem_bytes=int(getattr(params, "smem_bytes", 0)),
                                    arch=target_arch(self.family, params, self.compiler.arch))

    def _launches(self, params: Any, shapes: Iterable[Shape]) -> dict[Shape, LaunchConfig]:
        out: dict[Shape, LaunchConfig] = {}
        for shape in shapes:
            launch = self.family.launch(params, shape, sm_count=int(self.device["sm_count"]))
            if isinstance(launch, Rejection):
                raise ValueError(f"{launch.reason}: {launch.message}")
            out[shape] = launch
        return out

    def checks(self, params: Any, shape: Shape, iteration: int, seed: int,
               verify: bool) -> list[dict[str, Any]]:
        """The correctness cases of one evaluation (seeds recorded in the cases)."""
        opts = self.options
        n_main = len(DISTRIBUTIONS) if verify else max(1, opts.main_dists)
        edges = list(opts.edge_shapes)
        if getattr(params, "fixed_shape", None) is not None:
            # a shape-specialized kernel runs at its own shape only (its launch refuses the
            # others): every distribution there instead of the edge shapes, whose tails the
            # template's generic form was checked on
            n_main, edges = len(DISTRIBUTIONS), []
        cases: list[tuple[Shape, str]] = [
            (shape, DISTRIBUTIONS[(iteration + i) % len(DISTRIBUTIONS)]) for i in range(n_main)
        ]
        cases += [(edge, DISTRIBUTIONS[(iteration + j + 1) % len(DISTRIBUTIONS)])
                  for j, edge in enumerate(edges)]
        launches = self._launches(params, [s for s, _ in cases])
        return [{"shape": [s.m, s.n, s.k], "dist": dist, "launch": launches[s].to_dict(),
                 "seed": (seed * 1_000_003 + iteration * 101 + i) & 0x7FFFFFFFFFFF}
                for i, (s, dist) in enumerate(cases)]

    def measure(self, params: Any, compiled: CompileResult, *, shape: Shape, iteration: int,
                seed: int, incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """Correctness on fresh inputs, then the benchmark (interleaved with the incumbent)."""
        if compiled.status != "ok":
            raise ValueError(f"cannot measure a candidate whose compile status is "
                             f"{compiled.status}")
        try:
            checks = self.checks(params, shape, iteration, seed, verify)
            bench_launch = self._launches(params, [shape])[shape]
        except ValueError as exc:
            return Measurement("rejected", error=str(exc))
        request: dict[str, Any] = {
            "op": "evaluate", "tol": self.options.tolerance, "checks": checks,
            "stop_on_failure": not verify,
            "candidate": {"key": compiled.source_hash, "cubin": compiled.cubin(),
                          "kernel": self.family.name},
            "bench": None if not self.options.bench else {
                      "shape": [shape.m, shape.n, shape.k], "launch": bench_launch.to_dict(),
                      "seed": seed + iteration, "runs": self.options.bench_runs,
                      "target_run_ms": self.options.target_run_ms,
                      "max_reps": self.options.max_reps, "warmup": self.options.warmup},
        }
        if incumbent is not None:
            inc_params, inc_compiled = incumbent
            request["incumbent"] = {
                "key": inc_compiled.source_hash, "cubin": inc_compiled.cubin(),
                "kernel": self.family.name,
                "launch": self._launches(inc_params, [shape])[shape].to_dict(),
            }
        start = time.perf_counter()
        reply = self.child.request(request, self.options.timeout_s)
        gpu_seconds = time.perf_counter() - start
        status = reply.get("status")
        if status in ("timeout", "crashed", "launch_error", "error"):
            cases = reply.get("cases") or []
            return Measurement(
                status if status != "error" else "crashed",
                correctness=correctness_block(cases, self.options.tolerance) if cases else None,
                error=reply.get("error"), gpu_seconds=gpu_seconds,
            )
        correctness = correctness_block(reply["cases"], self.options.tolerance)
        profile = light_profile(params, compiled, self.device, reply.get("function"))
        if not correctness["passed"]:
            return Measurement("wrong", correctness=correctness, profile=profile,
                               error=correctness["reason"], gpu_seconds=gpu_seconds)
        bench = reply.get("bench")
        if bench is None:
            return Measurement("ok", correctness=correctness, profile=profile,
                               gpu_seconds=gpu_seconds)
        perf = perf_block(bench["runs_us"][0], shape.flops, vendor_us=self.vendor_us(shape),
                          peak_tflops=self.peak_tflops, reps=bench["reps_per_run"])
        if self.options.profile == "full":
            self.full_profile(profile, compiled, shape, bench_launch)
        inc_runs = bench["runs_us"][1] if len(bench["runs_us"]) > 1 else None
        return Measurement("ok", correctness=correctness, perf=perf, profile=profile,
                           incumbent_runs_us=inc_runs, gpu_seconds=gpu_seconds)

    def full_profile(self, profile: dict[str, Any], compiled: CompileResult, shape: Shape,
                     launch: LaunchConfig) -> None:
        """Add Nsight Compute's figures (sources ``ncu``) to a light profile, in place."""
        from worker.ncu import profile_kernel

        figures, missing = profile_kernel(compiled.cubin(), self.family.name,
                                          (shape.m, shape.n, shape.k), launch.to_dict(),
                                          gpu=self.child.gpu)
        for name, value in figures.items():
            profile[name] = value
            profile["sources"][name] = "ncu"
            profile["missing"].pop(name, None)
        for name, why in missing.items():
            profile["missing"][name] = why

    def vendor_us(self, shape: Shape) -> float | None:
        """cuBLAS fp32 (TF32 off) ``addmm`` + ``relu_`` median, measured once per shape."""
        key = str(shape)
        if key not in self._vendor:
            self._vendor[key] = measure_vendor(shape, self.device, self.vendor_cache)
        return self._vendor[key]

    def close(self) -> None:
        """Stop the child and the compile pool."""
        self.child.close()
        self.compiler.close()


def measure_vendor(shape: Shape, device: dict[str, Any], cache: Path | None) -> float | None:
    """Time cuBLAS in a short-lived process (torch or cupy), cached per GPU and shape."""
    key = f"{device.get('name')}|{device.get('driver_version')}|{shape}"
    store: dict[str, Any] = {}
    if cache is not None and cache.exists():
        store = json.loads(cache.read_text())
        if key in store:
            return store[key]
    try:
        out = subprocess.run(
            [sys.executable, "-m", "worker.vendor", str(shape)], capture_output=True, text=True,
            timeout=300, cwd=str(Path(__file__).resolve().parent.parent),
        )
        lines = out.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {}
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        result = {}
    value = result.get("avg_us")
    if cache is not None and value is not None:
        store[key] = value
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(store, indent=1))
    return value


# ---- the replay backend ---------------------------------------------------------------------
class ReplayDataset:
    """Measurements of a space on one GPU, one JSON object per line (gzip allowed)."""

    def __init__(self, path: Path, family: Any = None) -> None:
        self.path = Path(path)
        self._normalize = family
        opener = gzip.open if self.path.suffix == ".gz" else open
        self.meta: dict[str, Any] = {}
        self.points: dict[tuple[str, str], dict[str, Any]] = {}
        self._shapes: list[str] | None = None
        with opener(self.path, "rt") as fh:
            for line in fh:
                if not line.strip():
                    continue
                row = json.loads(line)
                if row.get("kind") == "meta":
                    self.meta = row
                    continue
                self.points[(self._key(row["params"]), row["shape"])] = row

    def _key(self, params: dict[str, Any]) -> str:
        # rows measured before a field was added lack it: the family fills its default
        if self._normalize is not None:
            params = self._normalize.params_from_dict(params).to_dict()
        return params_key(params)

    def use_family(self, family: Any) -> None:
        """Key the rows by the family's canonical parameters (all fields present)."""
        if self._normalize is family:
            return
        self._normalize = family
        self.points = {(self._key(r["params"]), s): r for (_, s), r in self.points.items()}
        self._shapes = None

    def get(self, params: dict[str, Any], shape: Shape) -> dict[str, Any] | None:
        """The measurement of a point, or None when it was not measured."""
        return self.points.get((self._key(params), str(shape)))

    def shapes(self) -> list[str]:
        """Shapes present in the dataset (listed once: a replay compile asks for every
        candidate)."""
        if self._shapes is None:
            self._shapes = sorted({s for _, s in self.points})
        return self._shapes

    def best(self, shape: Shape) -> dict[str, Any] | None:
        """The fastest correct point at ``shape``."""
        rows = [r for (_, s), r in self.points.items()
                if s == str(shape) and r["status"] == "ok" and r.get("perf")]
        return min(rows, key=lambda r: r["perf"]["avg_us"]) if rows else None


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
        self.device = dict(dataset.meta.get("device") or {})
        self.device.setdefault("name", dataset.meta.get("gpu", "unknown GPU"))
        self.measured_on = dataset.meta.get("date")

    def compile(self, params: Any) -> Future[CompileResult]:
        """The recorded compile figures (a rejection is decided the same way as on a GPU)."""
        future: Future[CompileResult] = Future()
        rejection = self.family.validate(params, self.arch)
        if rejection is not None:
            data = rejection.to_dict()
            data.setdefault("max_smem_limit", self.family.max_smem_limit(self.arch))
            future.set_result(CompileResult.rejected(data, int(getattr(params, "smem_bytes", 0))))
            return future
        shapes = self.dataset.shapes()
        row = None
        for shape in shapes:
            row = self.dataset.get(params.to_dict(), Shape.parse(shape))
            if row is not None:
                break
        if row is None:
            future.set_result(CompileResult("not_measured", 0.0, error="this point is not in "
                                            "the replay dataset"))
            return future
        c = row["compile"]
        result = CompileResult(
            status=c["status"], seconds=c.get("seconds", 0.0),
            regs_per_thread=c.get("regs_per_thread"),
            static_smem_bytes=(c.get("smem_bytes") or 0) - int(getattr(params, "smem_bytes", 0)),
            dynamic_smem_bytes=int(getattr(params, "smem_bytes", 0)),
            stack_bytes=c.get("stack_bytes"),
            spill_store_bytes=c.get("spill_bytes"), spill_load_bytes=0,
            error=c.get("error"), cache_hit=True, source_hash=self.family.source_hash(params),
            arch=self.arch,
        )
        future.set_result(result)
        return future

    def measure(self, params: Any, compiled: CompileResult, *, shape: Shape, iteration: int,
                seed: int, incumbent: tuple[Any, CompileResult] | None = None,
                verify: bool = False) -> Measurement:
        """The recorded measurement of the point at ``shape`` (``not_measured`` if absent)."""
        row = self.dataset.get(params.to_dict(), shape)
        if row is None:
            return Measurement("not_measured",
                               error=f"{shape} was not measured for this point in the dataset")
        inc_runs = None
        if incumbent is not None:
            inc_row = self.dataset.get(incumbent[0].to_dict(), shape)
            if inc_row is not None and inc_row.get("perf"):
                inc_runs = list(inc_row["perf"]["runs_us"])
        return Measurement(row["status"], correctness=row.get("correctness"),
                           perf=row.get("perf"), profile=row.get("profile"),
                           error=row.get("error"), incumbent_runs_us=inc_runs,
                           gpu_seconds=float(row.get("gpu_seconds", 0.0)))

    def vendor_us(self, shape: Shape) -> float | None:
        """cuBLAS time recorded with the dataset."""
        value = (self.dataset.meta.get("vendor_us") or {}).get(str(shape))
        return float(value) if value is not None else None

    def close(self) -> None:
        """Nothing to release."""


def feedback_record(params: Any, compiled: CompileResult, m: Measurement | None, *,
                    max_smem_limit: int, device: dict[str, Any], backend: str,
                    action: str | None = None, iteration: int = 0) -> dict[str, Any]:
    """A standalone feedback record (DESIGN.md §5) of one evaluation, validated by the schema."""
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
