"""Run ``python -m cli.main ARGS`` with every thread under cProfile; the merged statistics to
``$PROFILE_OUT`` (default ``/tmp/all.prof``). Used to see where a re-submitted shape set's
wall time goes on the GPU host (the campaign loop runs in worker threads, which a plain
``python -m cProfile`` does not see). Python 3.11 only: from 3.12 one ``cProfile`` may be
active at a time, and the H200's Python 3.12 refused the second thread's (this run's
``set-3.json`` stopped at 0 evaluations)."""

import cProfile
import os
import pstats
import runpy
import sys
import threading

profiles = []
_run = threading.Thread.run


def _profiled(self: threading.Thread) -> None:
    profile = cProfile.Profile()
    profiles.append(profile)
    profile.enable()
    try:
        _run(self)
    finally:
        profile.disable()


threading.Thread.run = _profiled  # type: ignore[method-assign]
sys.argv = ["cli.main", *sys.argv[1:]]
main = cProfile.Profile()
profiles.append(main)
main.enable()
try:
    runpy.run_module("cli.main", run_name="__main__")
except SystemExit:
    pass
finally:
    main.disable()
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    stats.dump_stats(os.environ.get("PROFILE_OUT", "/tmp/all.prof"))
