"""Policies on the replay space: expert rules and tabu, Optuna and random, and the LLM policy
against a real OpenAI-compatible HTTP server on the loopback interface."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from replay_support import (
    candidates,
    context,
    create,
    events,
    item,
    new_database,
    replay,
    run,
    walk,
    with_block,
)

from agent.policies import make_policy
from agent.policies.base import HistoryItem, Proposal, key_of
from agent.policies.expert import STAGNATION_WINDOW, ExpertPolicy, local_search_reason
from agent.policies.llm import LlmPolicy
from agent.policies.optuna_policy import OptunaPolicy
from agent.policies.random_policy import RandomPolicy
from kernels.base import Candidate as Point
from kernels.base import Rejection

#: baseline → coalesced, float4, staged tiles, 4x4 register block (block 16x16, tile 16)
TILED = ["apply_coalesce(true)", "apply_vectorize(4)", "apply_shared_memory_load(true)",
         "apply_register_block(4, 4)"]


def _keys(proposals: list[Proposal]) -> list[str]:
    return [key_of(p.params) for p in proposals]


def _assert_fresh_and_valid(proposals: list[Proposal], explored: set[str]) -> None:
    rp = replay()
    keys = _keys(proposals)
    assert len(set(keys)) == len(keys)
    assert not set(keys) & explored
    for p in proposals:
        assert rp.family.validate(p.params, "sm_90") is None
        assert rp.space.contains(p.params)


def _mixed_history() -> tuple[list[HistoryItem], HistoryItem]:
    """The TILED walk plus a few reverted neighbours of its end."""
    hist = walk(TILED)
    inc = hist[-1]
    for i, (x, y) in enumerate([(32, 8), (64, 4), (16, 8)], start=len(hist)):
        hist.append(item(with_block(inc.params, x, y), i, parent=inc,
                         action=f"change_block_config({x}, {y})"))
    return hist, inc


# ---- Optuna and random ---------------------------------------------------------------------
@pytest.mark.parametrize("policy_type", [OptunaPolicy, RandomPolicy])
def test_sampling_policies_give_distinct_unexplored_valid_points(policy_type: type) -> None:
    hist, inc = _mixed_history()
    ctx = context(hist, inc, seed=4)
    proposals = policy_type().propose(ctx, 8)
    assert len(proposals) == 8
    _assert_fresh_and_valid(proposals, {h.key for h in hist})
    assert {p.proposed_by for p in proposals} == {policy_type().name}


@pytest.mark.parametrize("policy_type", [OptunaPolicy, RandomPolicy])
def test_sampling_policies_are_reproducible_for_a_seed(policy_type: type) -> None:
    hist, inc = _mixed_history()
    first = _keys(policy_type().propose(context(hist, inc, seed=7), 6))
    again = _keys(policy_type().propose(context(hist, inc, seed=7), 6))
    other = _keys(policy_type().propose(context(hist, inc, seed=8), 6))
    assert first == again
    assert first != other


# ---- expert -----------------------------------------------------------------------------------
def test_expert_starts_with_the_seed_rules_from_the_baseline() -> None:
    hist = walk([])
    proposals = ExpertPolicy().propose(context(hist, hist[0]), 3)
    # (staging tiles before coalescing is outside the measured space: skipped)
    assert [p.action for p in proposals] == ["apply_coalesce(true)", "apply_vectorize(4)",
                                             "apply_register_block(4, 4)"]
    assert "strided" in proposals[0].reason
    assert "memory-bound" in proposals[1].reason


def test_expert_never_proposes_an_explored_point() -> None:
    hist, inc = _mixed_history()
    proposals = ExpertPolicy().propose(context(hist, inc, stagnation=4 * STAGNATION_WINDOW),
                                       100)
    assert len(proposals) == 100
    _assert_fresh_and_valid(proposals, {h.key for h in hist})


@pytest.mark.parametrize(("lost", "neighbour"), [((32, 4), (16, 8)), ((16, 8), (32, 4)),
                                                 ((64, 8), (32, 16))])
def test_a_lost_block_shape_rules_out_only_itself(
        lost: tuple[int, int], neighbour: tuple[int, int]) -> None:
    # a shape of the same thread count makes another tile (block_m x block_n): not ruled out
    hist = walk(TILED)
    inc = hist[-1]
    target = key_of(with_block(inc.params, *neighbour))
    loser = item(with_block(inc.params, *lost), len(hist), parent=inc,
                 action=f"change_block_config({lost[0]}, {lost[1]})")
    assert loser.avg_us is not None
    assert inc.avg_us is not None
    assert loser.avg_us > inc.avg_us
    for stagnation in (0, STAGNATION_WINDOW, 3 * STAGNATION_WINDOW):
        after = _keys(ExpertPolicy().propose(context([*hist, loser], inc,
                                                     stagnation=stagnation), 500))
        assert target in after, stagnation
        assert loser.key not in after


def test_stagnation_window_widens_to_two_step_moves() -> None:
    hist, inc = _mixed_history()
    calm = ExpertPolicy().propose(context(hist, inc, stagnation=STAGNATION_WINDOW - 1), 3000)
    stuck = ExpertPolicy().propose(context(hist, inc, stagnation=STAGNATION_WINDOW), 3000)
    assert not any(" ; " in p.action for p in calm)
    two_step = [p for p in stuck if " ; " in p.action]
    assert two_step
    for p in two_step:
        assert "two-step move" in p.reason
        assert p.parent_id == inc.id
        first, second = p.action.split(" ; ")
        node = replay().family.apply(Point(inc.params), first)
        assert not isinstance(node, Rejection)
        assert key_of(replay().family.apply(node, second).params) == key_of(p.params)


def _all_neighbours(params: Any) -> list[Any]:
    rp = replay()
    out = []
    for spec in rp.family.transforms:
        if spec.name == "revert_last":
            continue
        for action in spec.actions():
            result = rp.family.apply(Point(params), action)
            if not isinstance(result, Rejection) and rp.space.contains(result.params):
                out.append(result.params)
    return out


def test_expert_widens_beyond_spent_neighbourhoods_before_running_dry() -> None:
    """Every neighbour of the incumbent and of the three fastest points is explored: the expert
    goes on from the neighbourhoods of the other correct points instead of ending the campaign
    with most of the space unexplored."""
    rp = replay()
    hist = walk([])
    inc = hist[0]
    known = {inc.key}
    while True:
        fastest = sorted(hist, key=lambda h: h.avg_us or 0.0)[:3]
        new = [p for h in [inc, *fastest] for p in _all_neighbours(h.params)
               if key_of(p) not in known]
        if not new:
            break
        for p in new:
            if key_of(p) not in known:
                known.add(key_of(p))
                hist.append(item(p, len(hist), parent=inc, action="x()"))
    assert len(hist) < len(rp.space.points()) // 4
    proposals = ExpertPolicy().propose(context(hist, inc), 5)
    assert len(proposals) == 5
    _assert_fresh_and_valid(proposals, known)


def test_make_policy_names_the_known_policies() -> None:
    with pytest.raises(ValueError, match="unknown policy 'foo'; known: expert, optuna"):
        make_policy("foo")
    with pytest.raises(ValueError, match="TUNEFORGE_LLM_URL"):
        make_policy("llm")


def test_a_policy_whose_package_is_missing_is_refused_before_a_campaign(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a GPU host without optuna ran the baseline, then failed with an internal error
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ValueError, match="policy 'optuna' needs the optuna package.*"
                                         "pip install optuna"):
        make_policy("optuna")
    monkeypatch.undo()
    assert make_policy("optuna").name == "optuna"


# ---- the LLM policy against a real HTTP server ------------------------------------------------
@dataclass
class FakeLlm:
    """An OpenAI-compatible chat-completions endpoint answering from a script."""

    url: str
    #: (HTTP status, assistant message content) per request; 500 once the script is spent
    script: list[tuple[int, str]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def fake_llm() -> Iterator[FakeLlm]:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) serving /v1/chat/completions."""
    state = FakeLlm(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "body": body,
                                   "auth": self.headers.get("Authorization")})
            payload: dict[str, Any]
            if self.path != "/v1/chat/completions":
                status, payload = 404, {"error": {"message": "no such route"}}
            else:
                status, content = state.script.pop(0) if state.script else (500, "")
                payload = ({"id": "chatcmpl-1", "object": "chat.completion",
                            "model": body.get("model"),
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": content}}]}
                           if status == 200 else {"error": {"message": "model overloaded"}})
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,),
                              daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _answer(*actions: str) -> str:
    return json.dumps({"actions": [{"action": a, "reason": f"because {a}"} for a in actions]})


def _llm(fake: FakeLlm) -> LlmPolicy:
    return LlmPolicy(fake.url, "fake-model", api_key="sk-test", timeout_s=10)


def test_llm_answer_is_used(fake_llm: FakeLlm) -> None:
    fake_llm.script.append((200, _answer("apply_coalesce(true)")))
    hist = walk([])
    ctx = context(hist, hist[0])
    proposals = _llm(fake_llm).propose(ctx, 1)
    assert ctx.notes == []
    (p,) = proposals
    assert (p.action, p.proposed_by, p.parent_id) == ("apply_coalesce(true)", "llm", hist[0].id)
    assert p.reason == "llm: because apply_coalesce(true)"
    assert p.params.coalesced
    (request,) = fake_llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "fake-model"
    assert body["response_format"]["type"] == "json_schema"
    prompt = json.loads(body["messages"][-1]["content"])
    assert "apply_register_block" in {a["name"] for a in prompt["action_space"]}
    assert prompt["incumbent"]["params"] == hist[0].params.to_dict()


@pytest.mark.parametrize(("content", "incumbent_after", "error"), [
    ("I would vectorize the loads first.", [], "not the answer schema"),
    (json.dumps({"moves": ["apply_vectorize(4)"]}), [], "not the answer schema"),
    (_answer("apply_magic(2)"), [], "unknown action 'apply_magic'"),
    (_answer("apply_tiling(7)"), TILED, "tile_size=7 is outside its domain"),
    (_answer("apply_register_block(4, 4)"), TILED[:3] + ["apply_register_block(8, 8)"],
     "already explored"),
    (_answer("change_block_config(128, 2)"), TILED, "outside the space"),
], ids=["not-json", "wrong-schema", "unknown-action", "out-of-domain", "explored",
        "outside-replay"])
def test_llm_invalid_answer_is_recorded_and_the_expert_decides(
        fake_llm: FakeLlm, content: str, incumbent_after: list[str], error: str) -> None:
    fake_llm.script.append((200, content))
    hist = walk(incumbent_after)
    if content == _answer("apply_register_block(4, 4)"):
        # the 4x4 point was evaluated (and lost) before the incumbent moved to 8x8
        hist.append(item(walk(TILED)[-1].params, len(hist), parent=hist[-2],
                         action="apply_register_block(4, 4)"))
    ctx = context(hist, hist[len(incumbent_after)])
    proposals = _llm(fake_llm).propose(ctx, 2)
    assert [n["kind"] for n in ctx.notes] == ["llm_invalid", "llm_fallback"]
    assert error in ctx.notes[0]["error"]
    expert = ExpertPolicy().propose(context(hist, hist[len(incumbent_after)]), 2)
    assert _keys(proposals) == _keys(expert)
    assert {p.proposed_by for p in proposals} == {"expert"}


def test_llm_http_error_is_recorded_and_the_expert_decides(fake_llm: FakeLlm) -> None:
    fake_llm.script.append((500, ""))
    hist = walk([])
    ctx = context(hist, hist[0])
    proposals = _llm(fake_llm).propose(ctx, 1)
    assert [n["kind"] for n in ctx.notes] == ["llm_failed", "llm_fallback"]
    assert "500" in ctx.notes[0]["error"]
    assert [p.proposed_by for p in proposals] == ["expert"]


def test_llm_valid_actions_of_a_partly_invalid_answer_are_kept(fake_llm: FakeLlm) -> None:
    fake_llm.script.append((200, _answer("apply_magic(2)", "apply_vectorize(4)")))
    hist = walk([])
    ctx = context(hist, hist[0])
    proposals = _llm(fake_llm).propose(ctx, 2)
    assert [n["kind"] for n in ctx.notes] == ["llm_invalid"]
    assert [(p.action, p.proposed_by) for p in proposals][0] == ("apply_vectorize(4)", "llm")
    assert proposals[1].proposed_by == "expert"


def test_llm_campaign_records_answers_failures_and_fallbacks(fake_llm: FakeLlm,
                                                            tmp_path: Path) -> None:
    fake_llm.script += [(200, _answer("apply_coalesce(true)")), (200, "no JSON today"),
                        (500, "")]
    _url, sessions = new_database(tmp_path)
    cid = create(sessions, policy="llm", budget_iterations=4, parallel=1)
    run(sessions, cid, policy=_llm(fake_llm))
    rows = candidates(sessions, cid)
    assert [(c.iteration, c.proposed_by) for c in rows] == [
        (0, "baseline"), (1, "llm"), (2, "expert"), (3, "expert")]
    assert rows[1].action == "apply_coalesce(true)"
    assert rows[1].accepted
    notes = [(e.payload["kind"], e.payload.get("error", "")) for e in events(sessions, cid)
             if e.kind == "note"]
    assert [k for k, _ in notes] == ["llm_invalid", "llm_fallback", "llm_failed", "llm_fallback"]
    assert "500" in notes[2][1]
    assert len(fake_llm.requests) == 3
    # the model saw the feedback of the first evaluated candidate on its second call
    prompt = json.loads(fake_llm.requests[1]["body"]["messages"][-1]["content"])
    assert prompt["incumbent"]["action"] == "apply_coalesce(true)"
    assert {h["iteration"] for h in prompt["recent_feedback"]} == {0, 1}


def test_llm_policy_falls_back_on_the_process_expert_and_its_memory() -> None:
    """The service builds a policy per decision: an LLM campaign's fallback must be the one
    expert object whose memory of the campaign outlives each of them."""
    from agent.policies import make_policy
    from agent.policies.llm import LlmPolicy

    first = LlmPolicy("http://127.0.0.1:9/v1", "m")
    second = LlmPolicy("http://127.0.0.1:9/v1", "m")
    assert first.fallback is second.fallback
    assert first.fallback is make_policy("expert")


def test_a_local_search_reason_gives_the_transforms_record_as_a_change_of_time() -> None:
    # improvement_pct is the share of the incumbent's time saved: tries that saved 16.8 % on
    # average read as the time going down, as the decisions say it ("time -7.50%")
    faster = local_search_reason(7, "apply_unroll", (16.8, 3))
    assert faster == ("local search from #7: apply_unroll, whose 3 tries so far changed the "
                      "time by -16.8% on average")
    assert "1 try so far changed the time by +2.0%" in local_search_reason(7, "apply_tiling",
                                                                           (-2.0, 1))
    assert "+0.0%" in local_search_reason(7, "apply_tiling", (0.0, 2))
    assert "no timed try" in local_search_reason(7, "apply_tiling", (0.0, 0))
