#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at c94f2bf: a GPU shape set over the four short-row shapes (budget 240),
# with the rule book's one-row-a-CTA points carrying max_first and ptx_stores, then its bests beside
# torch, torch.compile and Triton (bench/peer_quality.py --campaigns). One tar comes back.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=c94f2bf TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r
shapes=65536x128,32768x512,16384x1024,8192x4096
timeout -s KILL 150 python3 -m cli.main tune --backend gpu --kernel softmax --shapes $shapes \
  --budget 240 --wall-seconds 130 --db $r/tune.db --out /tmp/tfout --json \
  2>$r/tune-progress.txt | tail -1 > $r/tune.json
python3 - $r/tune.json <<'PY' 2>&1 | tee $r/log.txt
import json, sys
r = json.load(open(sys.argv[1]))
print(f"tune: {r.get('status')} · {r.get('evaluations')} evaluations · {r.get('gpu_seconds')} GPU-s")
for s in r.get("shapes", []):
    b = s.get("best") or {}
    print(f"  {s['shape']:>12s} {s.get('evaluations'):4} evals  best {b.get('avg_us')} us "
          f"{s.get('x_vendor')}x torch  {json.dumps(b.get('params'), sort_keys=True)}")
PY
timeout -s KILL 200 python3 bench/peer_quality.py --family softmax --shapes $shapes --no-replay \
  --campaigns $r/tune.db --out $r/q --budget-s 180 2>$r/q-progress.txt | tail -12 | tee -a $r/log.txt
gzip -9 $r/tune.db
tar -C $OUT -czf $OUT/out.tgz r && rm -rf $r
