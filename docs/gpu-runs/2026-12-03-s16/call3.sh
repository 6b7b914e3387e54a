#!/usr/bin/env bash
# Session 16, call 3 (<= 240 s of timeouts): more CTAs of a row's cluster an SM. Call 2 found
# the staged cluster of 8 (120 SMs) no faster than the cluster of 16 (112 SMs): covering SMs is
# not what limits. Here CTAs of 256 threads holding 8 float4 in registers and 8 staged, four an
# SM (set_min_ctas(4): 64 registers), so that four CTAs' load, reduction and store phases
# overlap on each SM. 1. Resident CTAs. 2. Beside the bests, torch and the copy.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-03-s16; mkdir -p /tmp/r
timeout -s KILL 60 python3 $d/resident.py occupancy.json 2>&1 | tail -12 | tee -a $log
timeout -s KILL 170 python3 bench/family_quality.py --kernel softmax --points $d/occupancy.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -15 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
