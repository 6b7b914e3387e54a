#!/usr/bin/env bash
# Session 10, call 3: the softmax correctness test after the -inf fix; softmax campaigns over the
# sweep (expert, GPU backend); their replay dataset; quality of every campaign best (flushed and
# sustained beside torch.softmax and the copy); the GEMM's two campaign bests beside cuBLAS.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
log=$OUT/log.txt; db=/tmp/softmax.db
echo "== softmax correctness (awkward shapes x distributions)" | tee -a $log
timeout -s KILL 60 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution" \
  tests/test_gpu_split_k.py::test_a_specialized_kernel_refuses_another_shape 2>&1 | tail -3 | tee -a $log
echo "== softmax campaigns" | tee -a $log
for s in 65536x128 32768x512 16384x1024 65536x1024 8192x4096 8192x8192 4096x32768 2048x65536 1024x131072 256x262144 16x262144; do
  timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 80 \
    --wall-seconds 17 --db $db --out /tmp/tfout --json 2>>/tmp/tune-err.txt | tail -1 | python3 -c "
import json, sys
r = json.loads(sys.stdin.read() or '{}'); b = r.get('best') or {}
print(f\"{r.get('shape', '$s'):12s} {r.get('evaluations')} ev {r.get('wall_seconds')} s best {b.get('avg_us')} us {b.get('throughput')} GB/s it {b.get('iteration')} torch {r.get('vendor_us')} pct {r.get('pct_of_vendor')}\")" | tee -a $log
done
tail -c 3000 /tmp/tune-err.txt > $OUT/tune-err-tail.txt
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out $OUT/replay-h200.jsonl.gz | tee -a $log
python3 - $db <<'PY' | tee -a $log
# seconds from each campaign's start to 95 % of its final best (accepted candidates)
import sys
from sqlalchemy import select
from core.db import session_factory
from core.models import Campaign
from agent.exports import campaign_points
with session_factory(f"sqlite:///{sys.argv[1]}")() as s:
    for c in s.scalars(select(Campaign).where(Campaign.backend == "gpu")).all():
        pts, _ = campaign_points(s, c)
        ok = [p for p in pts if p["accepted"] and p["throughput"]]
        if not ok:
            continue
        final = max(p["throughput"] for p in ok)
        first = min((p for p in ok if p["throughput"] >= 0.95 * final), key=lambda p: p["elapsed_s"])
        print(f"95% {c.shape_text:12s} after {first['elapsed_s']:6.1f} s (evaluation {first['iteration']}) of {max(p['elapsed_s'] or 0 for p in pts):.1f} s")
PY
echo "== softmax quality" | tee -a $log
timeout -s KILL 200 python3 bench/family_quality.py --kernel softmax --db $db --out $OUT/sm --min-ms 300 2>>$OUT/q-err.txt | tail -16 | tee -a $log
echo "== GEMM quality" | tee -a $log
P=docs/gpu-runs/2026-12-01-s10/gemm-bests.json
timeout -s KILL 150 python3 bench/family_quality.py --kernel gemm_bias_relu --min-ms 300 --out $OUT/gemm \
  --params "$(python3 -c "import json;print(json.dumps(json.load(open('$P'))['ws_wgmma']))")" --label ws_wgmma \
  --params "$(python3 -c "import json;print(json.dumps(json.load(open('$P'))['simt_stream_k']))")" --label simt_stream_k \
  --shapes 4096x4096x4096,8192x8192x8192 2>>$OUT/q-err.txt | tail -8 | tee -a $log
tail -c 3000 $OUT/q-err.txt > $OUT/q-err-tail.txt; rm -f $OUT/q-err.txt
