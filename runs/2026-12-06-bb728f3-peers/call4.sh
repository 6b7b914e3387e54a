#!/usr/bin/env bash
# at bb728f3, the same warm H100: the transpose's campaign and peers again, every file kept,
# then the user family's GPU tests (the renderer moved in bb728f3).
export TUNEFORGE_COMMIT=bb728f3
SPEC=examples/transpose BUDGET=200 WALL_S=30 PEER_S=50 \
  bash bench/gpu_campaign_peers.sh transpose 8192x8192 2>&1 | tail -5
rm -rf $OUT/r
export PYTHONPATH=/tmp/site:$PWD
timeout -s KILL 100 python3 -m pytest -q -m gpu tests/test_gpu_user_family.py -p no:cacheprovider 2>&1 | tail -3
