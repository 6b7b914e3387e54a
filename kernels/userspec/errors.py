"""The one error a refused spec raises: the field it is about and the problem."""

from __future__ import annotations


class SpecError(ValueError):
    """A family spec refused: ``field`` is a dotted path into the spec (``tunables.block_x``,
    ``signature.buffers[1].count``), ``problem`` says what is wrong with it; ``str()`` is
    ``"<field>: <problem>"`` (what the API's 422 and the CLI's exit 2 print)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form: ``{"field", "problem"}``."""
        return {"field": self.field, "problem": self.problem}
