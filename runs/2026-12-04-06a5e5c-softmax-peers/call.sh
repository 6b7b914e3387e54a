#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at 06a5e5c: bench/softmax_peer_points.sh (the rule book's first
# points at the eleven replay shapes, a GPU shape set over them, every best beside torch,
# torch.compile and the Triton kernel); everything packed in one tar for the trip back.
mkdir -p $OUT/r
OUT=$OUT/r timeout -s KILL 560 bash bench/softmax_peer_points.sh 06a5e5c > $OUT/script.txt 2>&1
echo "script exit $?"
tail -60 $OUT/r/log.txt
tar -C $OUT -czf $OUT/peers.tgz r script.txt && rm -rf $OUT/r
