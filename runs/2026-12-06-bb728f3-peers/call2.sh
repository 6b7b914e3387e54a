#!/usr/bin/env bash
# at bb728f3, the same warm H100: the two GEMM shapes call1.sh's set never reached, as one set.
export TUNEFORGE_COMMIT=bb728f3
BUDGET=240 WALL_S=140 PEER_S=110 bash bench/gpu_campaign_peers.sh gemm_bias_relu \
  3000x5000x2000,2048x2048x8192 2>&1 | tail -10
rm -rf $OUT/r
