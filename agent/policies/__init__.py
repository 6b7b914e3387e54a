"""Search policies behind one interface (:class:`agent.policies.base.Policy`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from agent.policies.base import Policy

POLICY_NAMES = ("expert", "optuna", "random", "llm")


@lru_cache(maxsize=1)
def shared_expert() -> Policy:
    """This process's expert policy: one object, whose memory of each campaign (what it derived
    from the history) serves every decision the process takes for it."""
    from agent.policies.expert import ExpertPolicy

    return ExpertPolicy()


def make_policy(name: str, settings: Any = None) -> Policy:
    """The policy called ``name``; ``ValueError`` names the known ones."""
    if name == "expert":
        return shared_expert()
    if name == "optuna":
        try:
            import optuna  # noqa: F401 - the policy imports it when it proposes
        except ImportError as exc:  # refused before a campaign starts, not after its baseline
            raise ValueError(f"policy 'optuna' needs the optuna package, which this Python "
                             f"cannot import ({exc}): pip install optuna, or another policy "
                             f"({', '.join(n for n in POLICY_NAMES if n != 'optuna')})") from exc
        from agent.policies.optuna_policy import OptunaPolicy

        return OptunaPolicy()
    if name == "random":
        from agent.policies.random_policy import RandomPolicy

        return RandomPolicy()
    if name == "llm":
        from agent.policies.llm import LlmPolicy

        if settings is None or not settings.llm_url:
            raise ValueError("policy 'llm' needs TUNEFORGE_LLM_URL (an OpenAI-compatible "
                             "endpoint) and TUNEFORGE_LLM_MODEL")
        return LlmPolicy(settings.llm_url, settings.llm_model, settings.llm_api_key,
                         settings.llm_timeout_s)
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
