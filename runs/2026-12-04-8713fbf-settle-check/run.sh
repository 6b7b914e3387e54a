# 2026-12-04, the 2-core development machine, the working tree committed as 06f3d8b + 8713fbf
# (run from a copy of it, so that edits made while it ran could not reach it).
# With SETTLE_AFTER = 100 (agent/engine/lifecycle.py), then 300:
.venv/bin/python -m bench.settle_check --seeds 0,1,2 --json settle-check-100.json > settle-check-100.log
.venv/bin/python -m bench.settle_check --seeds 0 --tolerances 1e-4,3e-5,1e-5,1e-3 --parallel 1,2 \
    --json settle-check-300.json > settle-check-300.log
