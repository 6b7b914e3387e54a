"""Per-file wall and CPU of each pytest process (an xdist worker, or a plain run): loaded with
``-p tfm_plugin`` from PYTHONPATH; writes FILE START END SELF_CPU CHILDREN_CPU lines (and START
and END lines) to ``$TFM_XD/<worker>.log``. Measurement only."""

from __future__ import annotations

import os
import resource
import time
from typing import Any

_state: dict[str, Any] = {"file": None, "t0": 0.0, "s0": 0.0, "c0": 0.0}
_out = os.environ.get("TFM_XD", "/tmp/tfmeasure/xd")


def _log(line: str) -> None:
    name = os.environ.get("PYTEST_XDIST_WORKER", "main") + ".log"
    with open(os.path.join(_out, name), "a") as f:
        f.write(line + "\n")


def _cpu() -> tuple[float, float]:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def _flush(now_file: str | None) -> None:
    st = _state
    if st["file"] is not None:
        s, c = _cpu()
        _log(f"{st['file']} {st['t0']:.2f} {time.time():.2f} {s - st['s0']:.2f} "
             f"{c - st['c0']:.2f}")
    st["file"] = now_file
    st["t0"] = time.time()
    st["s0"], st["c0"] = _cpu()


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    f = nodeid.split("::")[0]
    if f != _state["file"]:
        _flush(f)


def pytest_sessionstart(session: Any) -> None:
    s, c = _cpu()
    _log(f"START {time.time():.2f} {s:.2f} {c:.2f}")


def pytest_sessionfinish(session: Any) -> None:
    _flush(None)
    s, c = _cpu()
    _log(f"END {time.time():.2f} {s:.2f} {c:.2f}")
