#!/usr/bin/env bash
# Session 12, call 1 (<= 560 s of timeouts): softmax campaigns at the five shapes issue 20's
# targets still miss (the rule book now offers the bulk-copy points), their bests beside
# torch.softmax and the copy (flushed, sustained >= 200 ms); hand-picked bulk points at the long
# rows; Nsight Compute of our 65536x128 kernels beside torch's own; Nsight Compute of the bf16x3
# and tf32x3 wgmma kernels at 4096^3 (issue 22: where the bf16 kernels' time goes).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; db=/tmp/softmax.db
echo "== softmax campaigns" | tee -a $log
for s in 65536x128 2048x65536 1024x131072 256x262144 16x262144; do
  timeout -s KILL 55 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 80 \
    --wall-seconds 20 --db $db --out /tmp/tfout --json 2>>/tmp/tune-err.txt | tail -1 | python3 -c "
import json, sys
r = json.loads(sys.stdin.read() or '{}'); b = r.get('best') or {}
print(f\"{r.get('shape', '$s'):12s} {r.get('evaluations')} ev {r.get('wall_seconds')} s best {b.get('avg_us')} us {b.get('throughput')} GB/s it {b.get('iteration')} torch {r.get('vendor_us')} pct {r.get('pct_of_vendor')}\"); print(json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
done
tail -c 3000 /tmp/tune-err.txt > $OUT/tune-err-tail.txt
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out $OUT/replay-s12.jsonl.gz | tail -2 | tee -a $log
echo "== softmax quality of the campaign bests" | tee -a $log
timeout -s KILL 110 python3 bench/family_quality.py --kernel softmax --db $db --out $OUT/sm --min-ms 200 2>>$OUT/q-err.txt | tail -9 | tee -a $log

C4x512='{"block_threads": 512, "bulk": 4, "cluster": 4, "row_threads": 512, "unroll": 2, "vec": 4}'
C8x256='{"block_threads": 256, "bulk": 4, "cluster": 8, "row_threads": 256, "unroll": 2, "vec": 4}'
C8x512='{"block_threads": 512, "bulk": 4, "cluster": 8, "row_threads": 512, "unroll": 2, "vec": 4}'
C8x512P8='{"block_threads": 512, "bulk": 8, "cluster": 8, "row_threads": 512, "store_hint": true, "unroll": 2, "vec": 4}'
C8x1024P8='{"block_threads": 1024, "bulk": 8, "cluster": 8, "row_threads": 1024, "unroll": 2, "vec": 4}'
echo "== hand-picked bulk points" | tee -a $log
timeout -s KILL 70 python3 bench/family_quality.py --kernel softmax --out $OUT/hand --min-ms 200 \
  --shapes 2048x65536,256x262144 --label c4x512 --params "$C4x512" --label c8x256 --params "$C8x256" \
  --label c8x512 --params "$C8x512" --label c8x512p8 --params "$C8x512P8" --label c8x1024p8 --params "$C8x1024P8" \
  2>>$OUT/q-err.txt | tail -12 | tee -a $log
tail -c 3000 $OUT/q-err.txt > $OUT/q-err-tail.txt; rm -f $OUT/q-err.txt

S10_65536='{"block_threads": 32, "chunks": 4, "cluster": 1, "load_hint": 1, "passes": 1, "row_threads": 4, "store_hint": true, "unroll": 1, "vec": 4}'
ONE4x8='{"block_threads": 128, "chunks": 8, "cluster": 1, "passes": 1, "row_threads": 4, "vec": 4}'
W32='{"block_threads": 256, "chunks": 1, "cluster": 1, "passes": 1, "row_threads": 32, "vec": 4}'
RT8='{"block_threads": 256, "bulk": 1, "row_threads": 8, "vec": 4}'
echo "== ncu softmax 65536x128" | tee -a $log
timeout -s KILL 90 python3 bench/ncu_sections.py --kernel softmax --shape 65536x128 --out $OUT/ncu-sm \
  --label s10best --params "$S10_65536" --label one4x8 --params "$ONE4x8" --label warp1 --params "$W32" \
  --label bulk8 --params "$RT8" --vendor regex:softmax 2>&1 | tail -16 | tee -a $log
echo "== ncu GEMM 4096^3 (bf16x3 lockstep and ws2, tf32x3 ws2)" | tee -a $log
pts=$(python3 -c "
import json, sys; sys.path.insert(0, 'tests'); from bf16_points import BF3, BF3_LOCKSTEP
print(json.dumps(BF3_LOCKSTEP.to_dict())); print(json.dumps(BF3.to_dict()))")
TF=$(python3 -c "import json;print(json.dumps(json.load(open('docs/gpu-runs/2026-12-01-s10/gemm-bests.json'))['ws_wgmma']))")
timeout -s KILL 120 python3 bench/ncu_sections.py --out $OUT/ncu-gemm --label bf3lock --params "$(echo "$pts" | sed -n 1p)" \
  --label bf3ws2 --params "$(echo "$pts" | sed -n 2p)" --label tf32ws2 --params "$TF" 2>&1 | tail -12 | tee -a $log
