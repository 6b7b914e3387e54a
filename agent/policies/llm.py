"""An LLM policy over any OpenAI-compatible chat-completions endpoint (httpx).

The model sees the action space and the latest feedback records and must answer with JSON
matching :data:`ANSWER_SCHEMA`. Each proposed action is validated against the action space and
applied to the incumbent; an invalid or failed answer is recorded (``ctx.notes``) and the expert
policy decides that step.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent.policies import shared_expert
from agent.policies.base import PolicyContext, Proposal, take_unique
from kernels.base import Action, Rejection

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["actions"],
    "properties": {
        "actions": {
            "type": "array", "minItems": 1, "maxItems": 8,
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["action", "reason"],
                "properties": {"action": {"type": "string"}, "reason": {"type": "string"}},
            },
        }
    },
}

SYSTEM = (
    "You tune a CUDA kernel by choosing code transforms from a fixed action space. "
    "Each action is applied to the current best kernel (the incumbent). Read the structured "
    "feedback (compile figures, correctness, perf, profile) and choose the transforms most "
    "likely to make the kernel faster while staying correct. Never repeat a point already "
    "evaluated. Answer only with JSON: {\"actions\": [{\"action\": \"name(args)\", "
    "\"reason\": \"...\"}]}, best first."
)


def _compact(item: Any) -> dict[str, Any]:
    return {
        "iteration": item.iteration, "action": item.action, "status": item.status,
        "avg_us": item.avg_us, "accepted": item.accepted, "params": item.params.to_dict(),
        "compile": {k: (item.compile or {}).get(k) for k in
                    ("regs_per_thread", "smem_bytes", "spill_bytes", "max_smem_limit", "error")},
        "profile": {k: v for k, v in (item.profile or {}).items()
                    if k not in ("sources", "missing")},
    }


class LlmPolicy:
    """Asks an OpenAI-compatible endpoint; falls back to the expert policy."""

    name = "llm"

    def __init__(self, url: str, model: str, api_key: str = "", timeout_s: float = 60.0,
                 history: int = 8, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.history = history
        self.transport = transport
        # the process's expert, whose memory of each campaign survives this object (the
        # service builds a policy object per decision)
        self.fallback = shared_expert()

    def messages(self, ctx: PolicyContext) -> list[dict[str, str]]:
        """The chat prompt: action space, incumbent, recent feedback."""
        space = [spec.to_dict() for spec in ctx.family.transforms
                 if ctx.action_allowed(spec.name)]
        recent = sorted(ctx.history, key=lambda h: h.iteration)[-self.history:]
        user = {
            "kernel": ctx.family.description,
            "action_space": space,
            "incumbent": _compact(ctx.incumbent) if ctx.incumbent else None,
            "recent_feedback": [_compact(h) for h in recent],
            "evaluations_since_last_improvement": ctx.stagnation,
            "accept_threshold_pct": ctx.threshold_pct,
        }
        return [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": json.dumps(user)}]

    def ask(self, ctx: PolicyContext) -> str:
        """The raw text of the model's answer (raises on HTTP or protocol errors)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {
            "model": self.model, "messages": self.messages(ctx), "temperature": 0.2,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "next_actions", "schema": ANSWER_SCHEMA, "strict": True}},
        }
        with httpx.Client(timeout=self.timeout_s, transport=self.transport) as client:
            resp = client.post(f"{self.url}/chat/completions", json=body, headers=headers)
            resp.raise_for_status()
            data = resp.json()
        return str(data["choices"][0]["message"]["content"])

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Valid proposals from the model's answer, the expert's for the rest."""
        out: list[Proposal] = []
        inc = ctx.incumbent
        if inc is None:
            return []
        try:
            raw = self.ask(ctx)
        except (httpx.HTTPError, KeyError, IndexError, ValueError, TypeError) as exc:
            ctx.notes.append({"kind": "llm_failed", "error": f"{type(exc).__name__}: {exc}"[:500]})
            raw = None
        if raw is not None:
            try:
                answer = json.loads(raw)
                items = answer["actions"]
                if not isinstance(items, list):
                    raise TypeError("'actions' is not a list")
            except (ValueError, KeyError, TypeError) as exc:
                ctx.notes.append({"kind": "llm_invalid", "error": f"not the answer schema: {exc}",
                                  "answer": raw[:2000]})
                items = []
            for item in items:
                text = str(item.get("action", "")) if isinstance(item, dict) else str(item)
                try:
                    action = Action.parse(text)
                    ctx.family.transforms.check(action)
                    if not ctx.action_allowed(action.name):
                        raise ValueError(f"{action.name} is not allowed in this campaign")
                    result = ctx.family.apply(ctx.point(inc.params), action)
                    if isinstance(result, Rejection):
                        raise ValueError(f"{result.reason}: {result.message}")
                    if not ctx.fresh(result.params):
                        raise ValueError("point already explored or outside the space")
                except ValueError as exc:
                    ctx.notes.append({"kind": "llm_invalid", "action": text[:200],
                                      "error": str(exc)[:300]})
                    continue
                reason = str(item.get("reason", ""))[:500] if isinstance(item, dict) else ""
                out.append(Proposal(result.params, str(action), f"llm: {reason}", self.name,
                                    inc.id))
        if len(out) < n:
            if not out:
                ctx.notes.append({"kind": "llm_fallback", "error": "no valid action from the "
                                  "model: the expert policy decides this step"})
            out += self.fallback.propose(ctx, n)
        return take_unique(out, n)
