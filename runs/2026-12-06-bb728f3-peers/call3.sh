#!/usr/bin/env bash
# at bb728f3, the same warm H100: one GEMM campaign of 450 at 3000x5000x2000 (g3/), then the
# softmax library entries of the 553da7c database timed beside the peers (sm/).
export TUNEFORGE_COMMIT=bb728f3 O=$OUT
OUT=$O/g3 BUDGET=450 WALL_S=150 PEER_S=80 bash bench/gpu_campaign_peers.sh gemm_bias_relu \
  3000x5000x2000 2>&1 | tail -7
rm -rf $O/g3/r; mkdir -p $O/sm
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
timeout -s KILL 170 python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --shapes 65536x128,32768x512,16384x1024,65536x1024,8192x8192 --out /tmp/smq \
  --budget-s 150 2>/tmp/smq-progress.txt | tee $O/sm/log.txt | tail -9
cp /tmp/smq-progress.txt $O/sm/; tar czf $O/sm/q.tgz -C /tmp smq
# --shapes does not narrow --campaigns: every shape of the database was timed (the eleven)
