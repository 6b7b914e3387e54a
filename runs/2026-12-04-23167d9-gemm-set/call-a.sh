#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 23167d9: the first half of the GEMM shape-set comparison at
# budgets where a campaign converges: one campaign of 160 evaluations at each of the eight
# shapes of bench/gpu_sets_heldout.sh, each on a fresh database (`--separate-only`); the
# second half (call-b.sh) takes them with `--separate-from`.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
SHAPES=4096x4096x4096:3,2048x2048x8192,3000x5000x2000,2048x2048x2048,1024x4096x4096,16384x1024x1024,128x4096x4096,1024x1024x1024
timeout -s KILL 555 python3 bench/shape_sets.py --kernel gemm_bias_relu --backend gpu \
  --shapes $SHAPES --budget 160 --separate-only --keep /tmp/keep --out $OUT/sets-gemm \
  > $OUT/separate.log 2>&1
echo "exit $?" | tee -a $log
cat $OUT/separate.log | grep -v '^\s*$' | tail -12 | tee -a $log
# the databases (each campaign's every evaluation), for the record
tar czf $OUT/dbs.tgz -C /tmp/keep $(cd /tmp/keep && ls *.db) 2>/dev/null; ls -la $OUT
