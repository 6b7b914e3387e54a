#!/usr/bin/env bash
# What this record holds and how it was made (2026-12-04, the 2-core development machine).
#
# per-file/: every test file but the fuzz file alone, `pytest -q -p no:cacheprovider FILE`
# under /usr/bin/time (user, sys, wall: the pytest process and the children it waited for),
# two files at a time, with nvcc-shim.sh first on PATH (each nvcc run: the file, a hash of its
# flags and input, user, sys and wall seconds, exit status, the calling process):
#   xargs -P2 -n1 per-file/runfile.sh < per-file/files.txt     (at 06a5e5c)
# table.txt: FILE USER SYS WALL SUMMARY; nvcc.log: FILE KEY USER SYS WALL RC CALLER FLAGS.
# (nvcc.log's first 114 lines have the shell's pid where later ones name the caller.)
#
# workers-06a5e5c/ and workers-42bdd5c/: the workers' phase, `make workers
# PYTEST_ARGS="--durations=20 -p tfm_plugin"` (run.sh), with /proc/stat before and after (the
# whole machine's busy and idle time) and tfm_plugin.py's per-file lines from each xdist
# worker: FILE START END SELF_CPU CHILDREN_CPU (children: those waited for while the file ran,
# so a session fixture's processes count where they are stopped, at the end).
# main.log: the xdist controller's lines (files in the order their results arrived, CPU 0) and,
# at 42bdd5c, the fault-injection file's own pytest beside the pool (test_fault_injection.py).
# Figures: docs/BENCHMARKS.md "Test suite" (2026-12-04, 601 -> 502 s).
