#!/usr/bin/env bash
# nvidia-h200, at e77de8c: the GEMM's clock under the power cap and the split-pass boundary
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=e77de8c
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
timeout -s KILL 90 python3 bench/pass_boundary.py --points bench/sustained_clock_points.json --reps 20 --out $OUT/boundary > $OUT/boundary.txt 2>&1
echo "boundary rc=$?" | tee -a $log; tail -8 $OUT/boundary.txt | tee -a $log
timeout -s KILL 330 python3 bench/sustained_clock.py --points bench/sustained_clock_points.json --shapes 4096x4096x4096,8192x8192x8192 --min-ms 2000 --budget-s 200 --out $OUT/clock > $OUT/clock.txt 2>&1
echo "clock rc=$?" | tee -a $log; tail -40 $OUT/clock.txt | tee -a $log
gzip -f $OUT/clock/smi.csv 2>/dev/null; true
