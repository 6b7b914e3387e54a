"""Two sessions at once on PostgreSQL, in a chosen order: the first's work left uncommitted
while the second runs in a thread and waits on its rows."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from core.db import session_factory, session_scope


def while_held(url: str, first: Callable[[Session], Any], second: Callable[[Session], Any], *,
               commit_after: threading.Event | None = None,
               committed: threading.Event | None = None) -> Any:
    """Run ``first`` in a session left open, start ``second`` in another thread's session,
    commit the first a second later (the second waits on its rows by then), or once
    ``commit_after`` is set, then set ``committed``; what ``second`` returned or raised."""
    answers: list[Any] = []
    holder = session_factory(url)()
    try:
        first(holder)

        def other() -> None:
            try:
                with session_scope(url) as s:
                    answers.append(second(s))
            except Exception as exc:  # the test says what it was
                answers.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        if commit_after is None:
            time.sleep(1.0)
        else:
            assert commit_after.wait(30)
        assert answers == [], answers  # the second has not got past the first's rows
        holder.commit()
        if committed is not None:
            committed.set()
        thread.join(60)
    finally:
        holder.close()
    assert len(answers) == 1
    return answers[0]
