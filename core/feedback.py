"""The feedback record: what the agent sees of every candidate
(docs/ARCHITECTURE.md#the-feedback-record).

One JSON document per candidate. ``core/feedback.schema.json`` is generated from these models
(``python -m core.feedback``) and a test keeps it in sync.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.statuses import FinalStatus

CompileStatus = Literal["ok", "error", "timeout", "rejected", "not_measured"]

SCHEMA_PATH = Path(__file__).with_name("feedback.schema.json")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompileFeedback(_Model):
    """nvcc and ptxas figures; ``max_smem_limit`` is always a number."""

    seconds: float = Field(description="nvcc's wall time (0 for a cache hit or a rejection)")
    regs_per_thread: int | None = Field(default=None, description="registers a thread (ptxas)")
    smem_bytes: int | None = Field(
        default=None, description="static plus dynamic shared memory a block")
    spill_bytes: int | None = Field(
        default=None, description="spill stores plus spill loads (ptxas)")
    stack_bytes: int | None = Field(default=None, description="stack frame a thread (ptxas)")
    max_smem_limit: int = Field(description="the arch's dynamic shared-memory limit a block")
    error: str | None = Field(default=None, description="a short summary of what failed")
    cache_hit: bool = Field(default=False, description="the cubin came from the compile cache")
    rejection: dict[str, Any] | None = Field(
        default=None, description="reason and numbers when the point was refused before nvcc"
    )


class CorrectnessCase(_Model):
    """One correctness check: fresh seeded inputs of one distribution at one shape."""

    shape: list[int] | dict[str, int] = Field(
        description="the dimensions' values in the family's order (or by name)")
    seed: int = Field(description="the inputs' seed (the case can be run again)")
    dist: str = Field(
        description="the input distribution (the family's names: normal, uniform, …)")
    rel_err: float | None = Field(description="||out - ref|| / ||ref|| (float64 reference)")
    max_abs_err: float | None = Field(description="max |out - ref|")
    max_scaled_err: float | None = Field(
        description="max |out - ref| / the reference's scale of the element (a GEMM's: "
                    "Σ|a·b| + |bias|)")
    nonfinite: int = Field(description="output elements that are NaN or Inf")
    unwritten: int = Field(description="output elements the kernel never wrote (still the poison)")
    passed: bool = Field(description="the case met the family's rule at the campaign's tolerance")
    reason: str | None = Field(default=None, description="why it failed, in words")


class CorrectnessRecheck(CorrectnessCase):
    """The case run once more after the timed launches: fresh inputs (its own seed), the
    outputs poisoned again, the very function that was timed (its module not reloaded), in the
    buffers it was timed in. A kernel that works only on its first launches, writes part of
    its output later, or skips work for an input pointer it has seen fails here."""

    after: Literal["timing", "sustained launches"] = Field(
        description="what the recheck followed: the benchmark's timed launches (with the "
                    "incumbent's, interleaved) or the back-to-back launches of a sustained run")
    launches_before: int = Field(description="timed launches of the candidate before it")
    timed_us: float | None = Field(
        default=None, description="the time those launches gave the candidate (µs a launch); "
                                  "not used for acceptance when the recheck failed")


class Correctness(_Model):
    """Worst figures over the cases and the recheck, and whether every one of them passed."""

    passed: bool = Field(description="every case and the recheck passed")
    max_abs_err: float | None = Field(default=None, description="the worst case's max |out - ref|")
    rel_err: float | None = Field(default=None, description="the worst norm-relative error")
    max_scaled_err: float | None = Field(
        default=None, description="the worst element error over the reference's scale")
    tolerance: float = Field(description="the campaign's tolerance the cases were judged at")
    reason: str | None = Field(default=None, description="the first failing case and what failed")
    cases: list[CorrectnessCase] = Field(
        default_factory=list, description="every case: the campaign's shape, then the edge shapes")
    recheck: CorrectnessRecheck | None = Field(
        default=None, description="after the timed launches; absent when nothing was timed")


class Perf(_Model):
    """Benchmark figures: median of runs, each run the median of adaptive repetitions, in the
    family's metric: ``throughput`` in ``unit`` (``TFLOP/s`` for a flops metric, which also
    gives ``throughput_tflops``; ``GB/s`` for a bytes metric, which also gives
    ``throughput_gbs``), held against ``peak`` (same unit) named by ``peak_source``."""

    avg_us: float = Field(description="median of the runs' medians, µs a launch")
    runs_us: list[float] = Field(description="each run's median, µs")
    spread_pct: float = Field(description="(slowest - fastest run) / median, %")
    reps_per_run: int | None = Field(default=None, description="timed launches in each run")
    throughput: float | None = Field(default=None, description="work / avg_us, in ``unit``")
    unit: Literal["TFLOP/s", "GB/s"] | None = Field(
        default=None, description="the family's metric: TFLOP/s or GB/s")
    throughput_tflops: float | None = Field(default=None,
                                            description="flops metrics only (TFLOP/s)")
    throughput_gbs: float | None = Field(default=None, description="bytes metrics only (GB/s)")
    pct_of_vendor: float | None = Field(
        default=None, description="the vendor's time over ours, % (over 100: faster than it)")
    pct_of_peak: float | None = Field(default=None, description="throughput / peak, %")
    peak: float | None = Field(default=None, description="the peak in ``unit``")
    peak_source: str | None = Field(default=None, description="where ``peak`` comes from")
    vendor_us: float | None = Field(
        default=None, description="the vendor baseline's time at this shape and GPU, µs")

    @model_validator(mode="after")
    def _one_throughput(self) -> Perf:
        if self.throughput_tflops is None and self.throughput_gbs is None:
            raise ValueError("perf needs throughput_tflops (flops) or throughput_gbs (bytes)")
        if self.unit == "TFLOP/s" and self.throughput_tflops is None:
            raise ValueError("a TFLOP/s perf block needs throughput_tflops")
        if self.unit == "GB/s" and self.throughput_gbs is None:
            raise ValueError("a GB/s perf block needs throughput_gbs")
        return self


class Profile(_Model):
    """Profile figures; each names its source in ``sources``, a missing one its reason."""

    sm_occupancy_pct: float | None = Field(
        default=None, description="achieved occupancy, % of an SM's warps (Nsight Compute)")
    theoretical_occupancy_pct: float | None = Field(
        default=None, description="theoretical occupancy from threads, registers and shared memory")
    memory_throughput_pct: float | None = Field(
        default=None, description="memory throughput, % of peak (Nsight Compute)")
    sm_busy_pct: float | None = Field(default=None, description="SM busy, % (Nsight Compute)")
    shared_mem_bank_conflicts: int | None = Field(
        default=None, description="shared-memory bank conflicts (Nsight Compute)")
    regs_per_thread: int | None = Field(default=None, description="registers a thread")
    max_dynamic_smem_bytes: int | None = Field(
        default=None, description="dynamic shared memory a launch asks for")
    spill_bytes: int | None = Field(default=None, description="spill bytes (ptxas)")
    limiter: str | None = Field(default=None, description="what limits theoretical occupancy")
    sources: dict[str, str] = Field(
        default_factory=dict, description="figure -> where it comes from (ptxas, ncu, …)")
    missing: dict[str, str] = Field(default_factory=dict, description="figure -> why null")


class Decision(_Model):
    """What the agent made of the candidate."""

    accepted: bool = Field(description="the candidate became the incumbent")
    improvement_pct: float | None = Field(
        default=None, description="the share of the incumbent's time it saved, %")
    reason: str = Field(description="why it was accepted or not, in words")
    incumbent_id: str | None = Field(
        default=None, description="the incumbent it was compared with (the campaign's when its "
                                  "result was recorded); absent for a failure or the first "
                                  "correct kernel")
    incumbent_iteration: int | None = Field(
        default=None, description="that incumbent's iteration")


class BestSoFar(_Model):
    """The incumbent after this candidate."""

    candidate_id: str | None = Field(default=None, description="the incumbent")
    avg_us: float | None = Field(default=None, description="its time, µs a launch")
    #: in ``unit``, the family's metric (TFLOP/s or GB/s)
    throughput: float | None = Field(default=None, description="in ``unit``, the family's metric")
    unit: str | None = Field(default=None, description="TFLOP/s or GB/s")
    #: the seed's field, for a flops metric
    throughput_tflops: float | None = Field(default=None, description="for a flops metric")
    rank_est: int | None = Field(
        default=None, description="the rank it would take in the campaign's leaderboard")


class FeedbackRecord(_Model):
    """One candidate's whole story."""

    iteration: int = Field(description="its place in the campaign (0: the baseline)")
    campaign_id: str | None = Field(default=None, description="its campaign")
    candidate_id: str | None = Field(default=None, description="this candidate")
    parent_id: str | None = Field(default=None, description="the candidate it was derived from")
    action_taken: str | None = Field(
        default=None, description="the transform that made it from its parent")
    params: dict[str, Any] = Field(description="its point of the family's space")
    status: FinalStatus = Field(description="its final outcome (statuses below)")
    compile_status: CompileStatus = Field(description="how its compile ended")
    compile: CompileFeedback = Field(description="nvcc and ptxas figures")
    correctness: Correctness | None = Field(default=None, description="the correctness checks")
    perf: Perf | None = Field(default=None, description="the benchmark")
    profile: Profile | None = Field(default=None, description="profile figures")
    decision: Decision | None = Field(default=None, description="what the agent made of it")
    best_so_far: BestSoFar | None = Field(default=None, description="the incumbent after it")
    device: dict[str, Any] | None = Field(default=None, description="GPU name, arch, driver")
    backend: str = Field(default="gpu", description="gpu or replay")
    error: str | None = Field(default=None, description="what went wrong, when something did")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`FeedbackRecord`."""
    schema = FeedbackRecord.model_json_schema()
    schema["$id"] = "https://tuneforge.dev/schemas/feedback-record.json"
    schema["title"] = "tuneforge feedback record"
    return schema


def write_schema(path: Path = SCHEMA_PATH) -> None:
    """Regenerate the schema file."""
    path.write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_schema()
