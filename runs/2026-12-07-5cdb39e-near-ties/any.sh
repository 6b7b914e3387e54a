#!/usr/bin/env bash
# Run as `any.sh COMMIT` (carry .whl and .ntlib): on an H200, h200.sh into $OUT/h200, then
# call.sh (the loader's GPU tests) into $OUT/tests; on another Hopper GPU, call.sh alone.
commit=${1:?usage: any.sh COMMIT}
here=$(dirname "$0")
if [[ "$(nvidia-smi --query-gpu=name --format=csv,noheader)" == *H200* ]]; then
  mkdir -p $OUT/h200; OUT=$OUT/h200 bash $here/h200.sh "$commit"
fi
mkdir -p $OUT/tests; OUT=$OUT/tests bash $here/call.sh "$commit"
