"""The recheck after the timed launches, without a GPU: what the child is
asked, that it rechecks the very function it timed in the timed buffers after the timing, the
verdict the evaluator draws from its answer, the feedback record and its schema, and that every
planted kernel of the ``cheat`` family compiles with the real nvcc. On the GPU:
``tests/test_gpu_cheat.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from core.evaluation import CompileResult, EvalOptions
from core.feedback import FeedbackRecord, json_schema
from kernels.base import Dims, LaunchConfig
from worker import gpu_child
from worker.compile import Compiler
from worker.evaluate import (
    GpuEvaluator,
    correctness_block,
    feedback_record,
    recheck_seed,
    timed_launches,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families.cheat import CHEATS, FAULTS, MODES, SKIP_IF_WRITTEN, CheatParams  # noqa: E402
from families.cheat import FAMILY as CHEAT  # noqa: E402

SHAPE = Dims(n=1 << 24)


def case(seed: int, *, passed: bool = True, unwritten: int = 0, shape: Any = (1 << 24,),
         dist: str = "normal") -> dict[str, Any]:
    """A case as the child's ``check_case`` answers it."""
    return {"shape": list(shape), "seed": seed, "dist": dist, "rel_err": 0.0,
            "max_abs_err": 0.0, "max_scaled_err": 0.0, "nonfinite": 0, "unwritten": unwritten,
            "passed": passed, "reason": None if passed else
            f"{unwritten} output element(s) never written", "kernel_seconds": 0.001}


class AnsweringChild:
    """Stands in for the GPU child: keeps the requests; passes every check, times the candidate
    at 10 µs when asked to, and answers the recheck with ``recheck`` (a case; None: none);
    given ``graph_recheck``, a sustained run has a graph (8 µs a launch) rechecked with it."""

    gpu = "0"

    def __init__(self, recheck: dict[str, Any] | None,
                 graph_recheck: dict[str, Any] | None = None) -> None:
        self.recheck = recheck
        self.graph_recheck = graph_recheck
        self.requests: list[dict[str, Any]] = []

    def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.requests.append(request)
        if request["op"] == "sustain":
            reply: dict[str, Any] = {"status": "ok", "sustained": {"launches": 400, "total_ms": 4.0,
                                                                   "us_per_launch": 10.0}}
            if self.graph_recheck is not None:
                reply["sustained"]["graph"] = {
                    "launches": 500, "calls": 5, "total_ms": 4.0, "us_per_launch": 8.0,
                    "recheck": {**self.graph_recheck, "seed": request["recheck"]["seed"]}}
        else:
            reply = {"status": "ok", "cases": [case(c["seed"], shape=c["shape"], dist=c["dist"])
                                               for c in request["checks"]]}
            if request["bench"] is None:
                return reply
            reply["bench"] = {"reps_per_run": 5, "runs_us": [[10.0, 11.0, 9.0]],
                              "warmup_us": [[12.0]], "samples_us": [[10.0] * 15]}
        if self.recheck is not None:
            reply["recheck"] = {**self.recheck, "seed": request["recheck"]["seed"]}
        return reply


def evaluator(child: AnsweringChild) -> GpuEvaluator:
    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.family = CHEAT
    ev.options = EvalOptions()
    ev.child = child  # type: ignore[assignment]
    ev.device = {"sm_count": 132, "name": "NVIDIA H200", "copy_gbs": 4000.0}
    ev._vendor = {}
    ev.vendor_cache = None
    return ev


@pytest.fixture
def compiled(tmp_path: Path) -> CompileResult:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"cubin")
    return CompileResult(status="ok", seconds=0.1, source_hash="h", cubin_path=str(cubin),
                         regs_per_thread=16, static_smem_bytes=0, spill_store_bytes=0,
                         spill_load_bytes=0)


def validate_against_the_schema(record: dict[str, Any]) -> None:
    """The record read back through the model the schema file is generated from (a test keeps
    the file in sync with it)."""
    FeedbackRecord.model_validate(json.loads(json.dumps(record)))


# ---- the request -----------------------------------------------------------------------------
def test_the_recheck_asked_for_has_a_fresh_seed_and_the_timed_distribution(
        compiled: CompileResult) -> None:
    child = AnsweringChild(case(0))
    m = evaluator(child).measure(CheatParams(), compiled, shape=SHAPE, iteration=4, seed=9)
    assert m.status == "ok", m.error
    request = child.requests[0]
    recheck = request["recheck"]
    seeds = {c["seed"] for c in request["checks"]} | {request["bench"]["seed"]}
    assert recheck["seed"] not in seeds
    # the bench's distribution and the reference launch of the bench's shape; the shape,
    # signature and launch are the bench's own, added by the child
    assert recheck["dist"] == CHEAT.distributions[0].name
    assert recheck["fills"] == request["bench"]["fills"]
    assert recheck["reference_launch"] == CHEAT.reference_launch(SHAPE).to_dict()
    assert recheck["rule"] == CHEAT.correctness.to_dict()
    assert set(recheck) == {"seed", "dist", "fills", "reference_launch", "rule"}


def test_no_recheck_is_asked_for_when_nothing_is_timed(compiled: CompileResult) -> None:
    child = AnsweringChild(None)
    m = evaluator(child).measure(CheatParams(), compiled, shape=SHAPE, iteration=0, seed=1,
                                 options=EvalOptions(bench=False))
    assert m.status == "ok", m.error
    assert "recheck" not in child.requests[0]
    assert "recheck" not in (m.correctness or {})


@pytest.mark.parametrize(("checks", "bench_seed"), [
    ([], None), ([{"seed": 5}], 6), ([{"seed": 1}, {"seed": 2}], 3),
    ([{"seed": 0x7FFFFFFFFFFF}], 0), ([{"seed": 7}], 7)])
def test_the_recheck_seed_is_none_of_the_evaluations_seeds(checks: list[dict[str, Any]],
                                                           bench_seed: int | None) -> None:
    seed = recheck_seed(checks, bench_seed)
    assert seed not in {c["seed"] for c in checks} | {bench_seed}
    assert 0 <= seed <= 0x7FFFFFFFFFFF


# ---- the verdict ----------------------------------------------------------------------------
def test_a_passing_recheck_is_recorded_and_the_timing_used(compiled: CompileResult) -> None:
    m = evaluator(AnsweringChild(case(0))).measure(CheatParams(), compiled, shape=SHAPE,
                                                   iteration=0, seed=1)
    assert m.status == "ok", m.error
    assert m.perf is not None
    assert m.perf["avg_us"] == 10.0
    correctness = m.correctness or {}
    assert correctness["passed"]
    recheck = correctness["recheck"]
    assert recheck["passed"]
    assert recheck["after"] == "timing"
    assert recheck["launches_before"] == 16  # one warm-up launch and 3 runs of 5 reps
    assert recheck["timed_us"] == 10.0
    assert "kernel_seconds" not in recheck
    record = feedback_record(CheatParams(), compiled, m, max_smem_limit=232448,
                             device={"name": "NVIDIA H200"}, backend="gpu")
    assert record["correctness"]["recheck"]["seed"] == recheck["seed"]
    validate_against_the_schema(record)


def test_a_failed_recheck_is_wrong_after_timing_and_its_timing_unused(
        compiled: CompileResult) -> None:
    bad = case(0, passed=False, unwritten=1 << 24)
    m = evaluator(AnsweringChild(bad)).measure(CheatParams("first_launch"), compiled,
                                               shape=SHAPE, iteration=0, seed=1)
    assert m.status == "wrong"
    assert m.perf is None  # nothing for acceptance to read
    assert m.error == "after timing: 16777216 normal: 16777216 output element(s) never written"
    correctness = m.correctness or {}
    assert not correctness["passed"]
    assert correctness["reason"] == m.error
    assert all(c["passed"] for c in correctness["cases"])  # it passed before the timing
    assert correctness["recheck"]["unwritten"] == 1 << 24
    assert correctness["recheck"]["timed_us"] == 10.0  # what the timer would have credited
    record = feedback_record(CheatParams("first_launch"), compiled, m, max_smem_limit=232448,
                             device={"name": "NVIDIA H200"}, backend="gpu")
    assert record["status"] == "wrong"
    assert record["perf"] is None
    validate_against_the_schema(record)


def test_the_engine_rejects_a_candidate_wrong_after_timing() -> None:
    from agent.engine.recording import _decide
    from core.evaluation import Measurement

    block = correctness_block([case(1)], 1e-4, {
        **case(2, passed=False, unwritten=3), "after": "timing", "launches_before": 16,
        "timed_us": 1.0})
    m = Measurement("wrong", correctness=block, error=block["reason"])
    decision = _decide(m, threshold_pct=0.5, first=False, incumbent_us=30.0)
    assert not decision.accepted
    assert "after timing" in decision.reason


def test_a_timed_candidate_without_its_recheck_is_never_ok(compiled: CompileResult) -> None:
    m = evaluator(AnsweringChild(None)).measure(CheatParams(), compiled, shape=SHAPE,
                                                iteration=0, seed=1)
    assert m.status == "crashed"
    assert m.perf is None
    assert "no recheck" in (m.error or "")


def test_a_case_failing_before_the_timing_is_the_reason_before_a_failed_recheck() -> None:
    block = correctness_block([case(1, passed=False, unwritten=2, shape=(7,))], 1e-4,
                              {**case(2, passed=False, unwritten=3), "after": "timing",
                               "launches_before": 4, "timed_us": 1.0})
    assert block["reason"] == "7 normal: 2 output element(s) never written"
    assert not block["passed"]


def test_the_worst_figures_count_the_recheck() -> None:
    recheck = {**case(2), "rel_err": 3e-5, "max_scaled_err": 2e-5, "after": "timing",
               "launches_before": 4, "timed_us": 1.0}
    block = correctness_block([case(1)], 1e-4, recheck)
    assert block["passed"]
    assert block["rel_err"] == 3e-5
    assert block["max_scaled_err"] == 2e-5


def test_timed_launches_counts_the_warm_up_and_every_rep() -> None:
    bench = {"warmup_us": [[1.0, 1.0], [2.0, 2.0]], "samples_us": [[1.0] * 30, [2.0] * 30]}
    assert timed_launches(bench) == 32


def test_a_sustained_run_is_rechecked_and_a_failure_replaces_the_rate(
        compiled: CompileResult) -> None:
    child = AnsweringChild(case(0))
    good = evaluator(child).sustained(CheatParams(), compiled, shape=SHAPE, seed=3)
    request = child.requests[0]
    assert request["recheck"]["seed"] != request["seed"]
    assert request["shape"] == [1 << 24]
    assert request["tol"] == 1e-4
    assert good["us_per_launch"] == 10.0
    assert good["recheck"]["after"] == "sustained launches"
    assert good["recheck"]["launches_before"] == 400
    bad = evaluator(AnsweringChild(case(0, passed=False, unwritten=8))).sustained(
        CheatParams("pointer_cache"), compiled, shape=SHAPE, seed=3)
    assert "us_per_launch" not in bad
    assert bad["error"] == ("wrong after sustained launches: 16777216 normal: 8 output "
                            "element(s) never written")


def test_the_graph_of_a_sustained_run_is_rechecked_and_a_failure_replaces_the_rate(
        compiled: CompileResult) -> None:
    """The graph the child timed was replayed on the recheck case: its verdict is kept beside
    the graph's rate, and a graph that computed wrong (one that lost a launch's epilogue reads
    faster) gives no rate, though the loop's recheck passed."""
    good = evaluator(AnsweringChild(case(0), case(0))).sustained(
        CheatParams(), compiled, shape=SHAPE, seed=3)
    assert "error" not in good, good
    assert good["graph"]["recheck"]["passed"]
    assert good["graph"]["recheck"]["after"] == "a graph of sustained launches"
    assert good["graph"]["recheck"]["launches_before"] == 500
    assert good["graph"]["recheck"]["timed_us"] == 8.0
    assert good["recheck"]["after"] == "sustained launches"
    bad = evaluator(AnsweringChild(case(0), case(0, passed=False, unwritten=8))).sustained(
        CheatParams(), compiled, shape=SHAPE, seed=3)
    assert "us_per_launch" not in bad
    assert bad["recheck"]["passed"]
    assert bad["error"] == ("wrong in the graph of sustained launches: 16777216 normal: 8 output "
                            "element(s) never written")


def test_the_schema_takes_a_recheck_and_refuses_one_without_its_fields() -> None:
    defs = json_schema()["$defs"]
    assert defs["Correctness"]["properties"]["recheck"]["anyOf"][0] == {
        "$ref": "#/$defs/CorrectnessRecheck"}
    assert {"after", "launches_before"} <= set(defs["CorrectnessRecheck"]["required"])
    recheck = {**{k: v for k, v in case(2).items() if k != "kernel_seconds"},
               "after": "timing", "launches_before": 4, "timed_us": 1.0}
    record: dict[str, Any] = {
        "iteration": 0, "params": {}, "status": "ok", "compile_status": "ok",
        "compile": {"seconds": 0.1, "max_smem_limit": 1},
        "correctness": {"passed": True, "tolerance": 1e-4, "cases": [], "recheck": recheck}}
    validate_against_the_schema(record)
    for broken in ({**recheck, "after": "never"},
                   {k: v for k, v in recheck.items() if k != "launches_before"},
                   {**recheck, "surprise": 1}):
        record["correctness"]["recheck"] = broken
        with pytest.raises(ValidationError):
            validate_against_the_schema(record)


# ---- the child's evaluate flow, with its GPU calls recorded ------------------------------------
class LoadedFunction:
    """Stands for a loaded kernel: the attributes the child reports of it."""

    num_regs = 16
    local_size_bytes = 0
    shared_size_bytes = 0


class RecordingRuntime(gpu_child.Runtime):
    """A runtime whose device work is recorded: ``candidate`` loads each key once (the object it
    returns stands for the loaded function), ``check_case`` passes except on the recheck's seed
    when ``recheck_passes`` is False."""

    def __init__(self, recheck_passes: bool = True, fail_check: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.loaded: dict[str, LoadedFunction] = {}
        self.loads = 0
        self.recheck_passes = recheck_passes
        self.fail_check = fail_check

    def candidate(self, entry: dict[str, Any], launch: dict[str, Any],
                  signature: dict[str, Any]) -> Any:
        if entry["key"] not in self.loaded:
            self.loads += 1
            self.loaded[entry["key"]] = LoadedFunction()
        return self.loaded[entry["key"]]

    def check_case(self, fn: Any, case_: dict[str, Any], tol: float,
                   run: Any = None) -> dict[str, Any]:
        assert run is None  # the evaluate and sustain flows here check one launch of fn
        self.calls.append(("check", (fn, case_)))
        passed = not self.fail_check and (self.recheck_passes or case_["seed"] != 99)
        return case(case_["seed"], passed=passed, unwritten=0 if passed else 5)

    def benchmark(self, entries: list[tuple[Any, dict[str, Any]]], bench: dict[str, Any]
                  ) -> dict[str, Any]:
        self.calls.append(("bench", entries))
        return {"reps_per_run": 1, "runs_us": [[1.0]] * len(entries),
                "warmup_us": [[1.0]] * len(entries), "samples_us": [[1.0]] * len(entries)}

    def sustain(self, fn: Any, req: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("sustain", fn))
        return {"launches": 10, "total_ms": 1.0, "us_per_launch": 100.0}


def evaluate_request() -> dict[str, Any]:
    sig = CHEAT.signature.resolve(SHAPE)
    launch_config = CHEAT.launch(CheatParams(), SHAPE)
    assert isinstance(launch_config, LaunchConfig)
    launch = launch_config.to_dict()
    fills = CHEAT.distributions[0].resolve(CHEAT.signature)
    ref = CHEAT.reference_launch(SHAPE).to_dict()
    check = {"shape": [SHAPE.n], "dist": "normal", "seed": 1, "signature": sig, "fills": fills,
             "launch": launch, "reference_launch": ref}
    return {"op": "evaluate", "tol": 1e-4, "stop_on_failure": True, "checks": [check],
            "candidate": {"key": "cand", "cubin": b"", "kernel": "cheat"},
            "incumbent": {"key": "inc", "cubin": b"", "kernel": "cheat", "launch": launch},
            "bench": {"shape": [SHAPE.n], "signature": sig, "fills": fills, "launch": launch,
                      "seed": 2},
            "recheck": {"seed": 99, "dist": "normal", "fills": fills, "reference_launch": ref}}


def test_the_child_rechecks_the_function_it_timed_after_the_timing() -> None:
    rt = RecordingRuntime()
    req = evaluate_request()
    reply = gpu_child.handle(rt, req)
    assert [kind for kind, _ in rt.calls] == ["check", "bench", "check"]
    (_, (checked_fn, _)), (_, entries), (_, (rechecked_fn, recheck_case)) = rt.calls
    timed_fn = entries[0][0]
    assert rechecked_fn is timed_fn is checked_fn  # one load, never a reload
    assert entries[1][0] is not timed_fn  # the incumbent, timed interleaved before the recheck
    assert rt.loads == 2
    bench = req["bench"]
    assert recheck_case["seed"] == 99
    assert recheck_case["signature"] is bench["signature"]
    assert recheck_case["launch"] is bench["launch"]  # the timed launch, the timed buffers
    assert recheck_case["shape"] == bench["shape"]
    assert reply["recheck"]["seed"] == 99
    assert reply["recheck"]["passed"]


def test_the_child_reports_a_failed_recheck_and_skips_it_when_a_check_failed() -> None:
    rt = RecordingRuntime(recheck_passes=False)
    reply = gpu_child.handle(rt, evaluate_request())
    assert reply["status"] == "ok"
    assert not reply["recheck"]["passed"]
    rt = RecordingRuntime(fail_check=True)
    reply = gpu_child.handle(rt, evaluate_request())
    assert [kind for kind, _ in rt.calls] == ["check"]  # neither timed nor rechecked
    assert "recheck" not in reply
    assert "bench" not in reply


def test_the_child_ends_a_sustained_run_with_the_recheck_of_the_same_function() -> None:
    rt = RecordingRuntime()
    base = evaluate_request()
    req = {"op": "sustain", "candidate": base["candidate"], "shape": [SHAPE.n],
           "launch": base["bench"]["launch"], "signature": base["bench"]["signature"],
           "fills": base["bench"]["fills"], "seed": 3, "min_ms": 1.0, "tol": 1e-4,
           "recheck": base["recheck"]}
    reply = gpu_child.handle(rt, req)
    assert [kind for kind, _ in rt.calls] == ["sustain", "check"]
    sustained_fn = rt.calls[0][1]
    rechecked_fn, recheck_case = rt.calls[1][1]
    assert rechecked_fn is sustained_fn
    assert recheck_case["launch"] is req["launch"]
    assert reply["recheck"]["passed"]
    assert reply["sustained"]["us_per_launch"] == 100.0


class Recorder:
    """A prepared support kernel or an event: appends what it is asked to do to a log."""

    def __init__(self, name: str, log: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.log = log

    def prepared_async_call(self, grid: Any, block: Any, stream: Any, *args: Any) -> None:
        self.log.append((self.name, *args))

    def record(self, stream: Any) -> None:
        self.log.append((self.name,))

    def time_since(self, other: Any) -> float:
        return 0.002


def test_every_timed_launch_follows_a_poison_of_the_outputs_and_a_flush(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside each event pair: the ``out`` buffers poisoned, then L2 flushed (which evicts the
    poison's lines), so a timed launch finds its output as a checked launch does; after it, a
    wait for the stream."""
    log: list[tuple[Any, ...]] = []
    rt = gpu_child.Runtime.__new__(gpu_child.Runtime)
    rt.stream, rt.sm_count, rt.flush_buf, rt.flush_n = "stream", 132, "FLUSH", 4096
    rt.poison, rt.flush = Recorder("poison", log), Recorder("flush", log)
    monkeypatch.setattr(rt, "_events", lambda count: [
        (Recorder("start", log), Recorder("end", log)) for _ in range(count)])
    monkeypatch.setattr(rt, "launch", lambda fn, launch, b, sig: log.append(("launch", fn)))
    monkeypatch.setattr(rt, "sync", lambda: log.append(("wait",)))
    sig = CHEAT.signature.resolve(Dims(n=1000))
    times = rt.time_launches([("cand", {}), ("inc", {})], {"x": "X", "y": "Y"}, sig, 2)
    one = [("poison", "Y", 1000), ("flush", "FLUSH", 4096), ("start",)]
    # each timed launch waited for before the next one's poison, as the vendor harness times
    assert log == [*one, ("launch", "cand"), ("end",), ("wait",),
                   *one, ("launch", "inc"), ("end",), ("wait",)] * 2
    assert times == [[2.0, 2.0], [2.0, 2.0]]


# ---- the planted kernels compile --------------------------------------------------------------
def test_every_planted_kernel_compiles_with_nvcc(compiler: Compiler) -> None:
    """Each mode of the ``cheat`` family (the honest kernel, every cheat, every fault) is a
    kernel nvcc builds for sm_90, as the GPU tests need it."""
    assert set(MODES) == {"honest", *CHEATS, SKIP_IF_WRITTEN, *FAULTS}
    results = {mode: compiler.compile(CHEAT.render(CheatParams(mode)), entry="cheat",
                                      dynamic_smem_bytes=CHEAT.dynamic_smem_bytes(
                                          CheatParams(mode)), arch="sm_90")
               for mode in MODES}
    failed = {m: r.error for m, r in results.items() if r.status != "ok"}
    assert not failed, failed
    for mode, result in results.items():
        assert result.cubin()[:4] == b"\x7fELF", mode
        assert result.regs_per_thread, mode
    sources = {mode: CHEAT.render(CheatParams(mode)) for mode in MODES}
    for mode in CHEATS:  # the state a reload would reset lives on the device
        assert "__device__ unsigned long long cheat_last_key" in sources[mode], mode
    assert "__device__" not in sources["honest"]
