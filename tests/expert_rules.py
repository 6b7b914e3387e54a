"""The expert policy's rule proposals for one incumbent, without a GPU (shared by the SIMT
pipeline tests; the agent is imported on call, so that GPU-test modules importing their points
stay lean)."""

from __future__ import annotations

from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape


def expert_rules(params: GemmParams, allowed: set[str] | None, shape: Shape,
                 regs: int = 128) -> list[str]:
    """The actions the expert proposes from ``params`` (accepted, 3000 µs, compiled to ``regs``
    registers a thread), local search left out; ``allowed`` None = every transform."""
    from agent.policies.base import HistoryItem, PolicyContext, key_of
    from agent.policies.expert import ExpertPolicy
    from agent.spaces import FullSpace

    inc = HistoryItem(id="inc", iteration=5, params=params, key=key_of(params), status="ok",
                      avg_us=3000.0, accepted=True,
                      compile={"spill_bytes": 0, "regs_per_thread": regs})
    ctx = PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_90"), arch="sm_90",
                        incumbent=inc, history=[inc], seed=1, iteration=6, threshold_pct=0.5,
                        allowed_actions=allowed, shape=shape)
    return [p.action for p in ExpertPolicy().propose(ctx, 40)
            if not p.reason.startswith("local search")]


def simt_only() -> set[str]:
    """Every transform but the tensor cores'."""
    return {s.name for s in FAMILY.transforms} - {"apply_tf32x3"}
