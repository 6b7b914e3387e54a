"""The feedback record of DESIGN.md §5: what the agent sees of every candidate.

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

    seconds: float
    regs_per_thread: int | None = None
    smem_bytes: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    max_smem_limit: int
    error: str | None = None
    cache_hit: bool = False
    rejection: dict[str, Any] | None = Field(
        default=None, description="reason and numbers when the point was refused before nvcc"
    )


class CorrectnessCase(_Model):
    """One correctness check: fresh seeded inputs of one distribution at one shape."""

    shape: list[int] | dict[str, int] = Field(
        description="the dimensions' values in the family's order (or by name)")
    seed: int
    dist: str
    rel_err: float | None = Field(description="||out - ref|| / ||ref|| (float64 reference)")
    max_abs_err: float | None
    max_scaled_err: float | None = Field(
        description="max |out - ref| / the reference's scale of the element (a GEMM's: "
                    "Σ|a·b| + |bias|)")
    nonfinite: int
    unwritten: int
    passed: bool
    reason: str | None = None


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

    passed: bool
    max_abs_err: float | None = None
    rel_err: float | None = None
    max_scaled_err: float | None = None
    tolerance: float
    reason: str | None = None
    cases: list[CorrectnessCase] = Field(default_factory=list)
    recheck: CorrectnessRecheck | None = Field(
        default=None, description="after the timed launches; absent when nothing was timed")


class Perf(_Model):
    """Benchmark figures: median of runs, each run the median of adaptive repetitions, in the
    family's metric: ``throughput`` in ``unit`` (``TFLOP/s`` for a flops metric, which also
    gives ``throughput_tflops``; ``GB/s`` for a bytes metric, which also gives
    ``throughput_gbs``), held against ``peak`` (same unit) named by ``peak_source``."""

    avg_us: float
    runs_us: list[float]
    spread_pct: float
    reps_per_run: int | None = None
    throughput: float | None = Field(default=None, description="work / avg_us, in ``unit``")
    unit: Literal["TFLOP/s", "GB/s"] | None = None
    throughput_tflops: float | None = Field(default=None,
                                            description="flops metrics only (TFLOP/s)")
    throughput_gbs: float | None = Field(default=None, description="bytes metrics only (GB/s)")
    pct_of_vendor: float | None = None
    pct_of_peak: float | None = None
    peak: float | None = Field(default=None, description="the peak in ``unit``")
    peak_source: str | None = Field(default=None, description="where ``peak`` comes from")
    vendor_us: float | None = None

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

    sm_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    memory_throughput_pct: float | None = None
    sm_busy_pct: float | None = None
    shared_mem_bank_conflicts: int | None = None
    regs_per_thread: int | None = None
    max_dynamic_smem_bytes: int | None = None
    spill_bytes: int | None = None
    limiter: str | None = Field(default=None, description="what limits theoretical occupancy")
    sources: dict[str, str] = Field(default_factory=dict)
    missing: dict[str, str] = Field(default_factory=dict, description="figure -> why null")


class Decision(_Model):
    """What the agent made of the candidate."""

    accepted: bool
    improvement_pct: float | None = None
    reason: str
    #: the incumbent the candidate was compared with (the campaign's when it was recorded),
    #: and its iteration; absent for a failure or the first correct kernel
    incumbent_id: str | None = None
    incumbent_iteration: int | None = None


class BestSoFar(_Model):
    """The incumbent after this candidate."""

    candidate_id: str | None = None
    avg_us: float | None = None
    #: in ``unit``, the family's metric (TFLOP/s or GB/s)
    throughput: float | None = None
    unit: str | None = None
    #: the seed's field, for a flops metric
    throughput_tflops: float | None = None
    rank_est: int | None = None


class FeedbackRecord(_Model):
    """One candidate's whole story (DESIGN.md §5)."""

    iteration: int
    campaign_id: str | None = None
    candidate_id: str | None = None
    parent_id: str | None = None
    action_taken: str | None = None
    params: dict[str, Any]
    status: FinalStatus
    compile_status: CompileStatus
    compile: CompileFeedback
    correctness: Correctness | None = None
    perf: Perf | None = None
    profile: Profile | None = None
    decision: Decision | None = None
    best_so_far: BestSoFar | None = None
    device: dict[str, Any] | None = Field(default=None, description="GPU name, arch, driver")
    backend: str = Field(default="gpu", description="gpu or replay")
    error: str | None = None


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
