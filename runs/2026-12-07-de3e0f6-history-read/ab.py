"""GET /history's route function before (a worktree of 79c8fc0, argv[1]) and after de3e0f6,
in one process, on three recorded databases and their x40 copies: the same entries, the new
one's queries, the median of 5 calls of each (ms). Run from the repository root."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, ".")

from sqlalchemy import event, update  # noqa: E402

from api import security  # noqa: E402
from api.routes.system import history  # noqa: E402
from api.security import Authenticated  # noqa: E402
from bench.library_read import copied  # noqa: E402
from core.db import session_scope, upgrade_database  # noqa: E402
from core.models import Campaign  # noqa: E402

SOURCES = ["runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz",
           "runs/2026-12-06-bb728f3-peers/call2/r/tune.db.gz",
           "runs/2026-12-04-06a5e5c-softmax-peers/r/tune.db.gz"]


def before_module(worktree: str) -> Any:
    spec = importlib.util.spec_from_file_location("before", f"{worktree}/api/routes/system.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["before"] = module
    spec.loader.exec_module(module)
    return module


def answer_and_queries(url: str, auth: Authenticated) -> tuple[list[Any], int]:
    """The new function's entries, and the statements it ran for them."""
    queries = [0]

    def count(*_args: Any, **_kwargs: Any) -> None:
        queries[0] += 1

    with session_scope(url) as s:
        bind = s.get_bind()
        event.listen(bind, "before_cursor_execute", count)
        try:
            return [e.model_dump() for e in history(s, auth, None, None, None)], queries[0]
        finally:
            event.remove(bind, "before_cursor_execute", count)


def median_ms(url: str, read: Any, auth: Authenticated) -> float:
    with session_scope(url) as s:
        read(s, auth, None, None, None)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            read(s, auth, None, None, None)
            times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 1)


def main() -> None:
    old = before_module(sys.argv[1])
    for source in SOURCES:
        for copies in (1, 40):
            db = copied(Path(source), copies, Path(tempfile.mkdtemp()))
            url = f"sqlite:///{db}"
            upgrade_database(url)
            with session_scope(url) as s:
                team, _ = security.create_team(s, name="history")
                s.execute(update(Campaign).values(team_id=team.id))
                auth = Authenticated(team_id=team.id, team_name="history", key_prefix="tf_history")
            with session_scope(url) as s:
                before = [e.model_dump() for e in old.history(s, auth, None, None, None)]
            after, queries = answer_and_queries(url, auth)
            print(f"{source.split('/')[1]} x{copies}: {len(after)} entries, same: "
                  f"{before == after}, queries after: {queries}, median ms before "
                  f"{median_ms(url, old.history, auth)}, after {median_ms(url, history, auth)}")


if __name__ == "__main__":
    main()
