#!/bin/bash
# at 5085a7a: bench/gpu_campaign_peers.sh end to end with its exported library timed in the
# peers' harness: the transpose user family at 8192x8192, a short campaign
export TUNEFORGE_COMMIT=5085a7a
SPEC=examples/transpose BUDGET=80 WALL_S=20 PEER_S=70 \
  bash bench/gpu_campaign_peers.sh transpose 8192x8192 2>&1 | tail -14
