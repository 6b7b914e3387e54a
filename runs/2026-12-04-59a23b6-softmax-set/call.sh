#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 59a23b6: the 12-shape softmax set against one campaign a shape
# (60 evaluations each, the set 300), then the set's library at 16 held-out shapes after
# `library probe` if the time is left. Everything packed into one archive under $OUT.
final=$OUT
export OUT=/tmp/setout; mkdir -p $OUT
SOFTMAX_BUDGET=60 SOFTMAX_SET_BUDGET=300 TOTAL_S=520 bash bench/gpu_sets_heldout.sh softmax
cp $OUT/log.txt $final/log.txt
tar czf $final/out.tgz -C $OUT .
