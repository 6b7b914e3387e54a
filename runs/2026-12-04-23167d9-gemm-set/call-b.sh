#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 23167d9: the second half of the GEMM shape-set comparison: the
# eight shapes as one set of 440 evaluations (4096³ weighted 3), taking call-a.sh's campaigns
# of 160 (`--separate-from`), submitted again, then its library exported at 16 held-out
# shapes, unmeasured picks and probed ones (bench/gpu_sets_heldout.sh gemm).
SEPARATE_FROM=$PWD/runs/2026-12-04-23167d9-gemm-set/a/sets-gemm/shape-sets.json \
  GEMM_BUDGET=160 GEMM_SET_BUDGET=440 TOTAL_S=560 PROBED_S=150 bash bench/gpu_sets_heldout.sh gemm
tar czf $OUT/r.tgz -C $OUT $(cd $OUT && ls -d sets-* heldout-* *.log 2>/dev/null); ls $OUT
