#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 2c60a9c: the 12-shape softmax set at a set budget of 360 against
# campaigns of 60 a shape, then the set's library probed and exported at 16 held-out shapes
# (bench/gpu_sets_heldout.sh softmax); everything packed in one tar for the trip back.
mkdir -p $OUT/r
OUT=$OUT/r SOFTMAX_BUDGET=60 SOFTMAX_SET_BUDGET=360 TOTAL_S=565 PROBED_S=240 \
  timeout -s KILL 575 bash bench/gpu_sets_heldout.sh softmax > $OUT/script.txt 2>&1
echo "script exit $?"
tail -22 $OUT/r/log.txt
tar -C $OUT -czf $OUT/set360.tgz r script.txt && rm -rf $OUT/r
