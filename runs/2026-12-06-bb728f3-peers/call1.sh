#!/usr/bin/env bash
# at bb728f3 (nvidia-h100-x1): the transpose user family's campaign, then the GEMM's four shapes
# as one set, each beside its vendor and peers (bench/gpu_campaign_peers.sh). Carry .whl.
# Only tp/log.txt came back of the transpose's files (a call returns at most 8 files): its
# campaign ran again in call4.sh with everything kept.
export TUNEFORGE_COMMIT=bb728f3 O=$OUT
OUT=$O/tp SPEC=examples/transpose BUDGET=200 WALL_S=30 PEER_S=50 \
  bash bench/gpu_campaign_peers.sh transpose 8192x8192 2>&1 | tail -9
OUT=$O/gemm BUDGET=400 WALL_S=160 PEER_S=140 bash bench/gpu_campaign_peers.sh gemm_bias_relu \
  4096x4096x4096,8192x8192x8192,3000x5000x2000,2048x2048x8192 2>&1 | tail -12
