#!/usr/bin/env bash
# Session 12, call 3 (<= 520 s of timeouts): after the cluster kernels' last barrier became a
# relaxed arrive (no MEMBAR behind the CTA's stores): the softmax GPU tests; our 65536x128
# kernels timed by the vendor's own harness (bench/harness_check.py); campaigns again at the
# long-row shapes and at 65536x128 (expert, then optuna); their bests beside torch.softmax and
# the copy; Nsight Compute of the 1024x131072 register-held cluster point (membar stalls).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
log=$OUT/log.txt; db=/tmp/softmax.db; mkdir -p /tmp/r
echo "== softmax GPU tests" | tee -a $log
timeout -s KILL 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_softmax.py 2>&1 | tail -3 | tee -a $log
B128='{"block_threads": 32, "chunks": 1, "cluster": 1, "load_hint": 0, "passes": 2, "row_threads": 8, "store_hint": false, "unroll": 1, "vec": 4}'
S10_128='{"block_threads": 32, "chunks": 4, "cluster": 1, "load_hint": 1, "passes": 1, "row_threads": 4, "store_hint": true, "unroll": 1, "vec": 4}'
TL='{"block_threads": 128, "chunks": 4, "cluster": 1, "passes": 1, "row_threads": 32, "vec": 1}'
echo "== 65536x128 in both harnesses" | tee -a $log
timeout -s KILL 60 python3 bench/harness_check.py --kernel softmax --shape 65536x128 --out /tmp/r/harness.json \
  --params "$B128" --params "$S10_128" --params "$TL" 2>>/tmp/r/err.txt | tail -6 | tee -a $log
echo "== campaigns" | tee -a $log
camp() {  # camp SHAPE POLICY BUDGET WALL
  timeout -s KILL 70 python3 -m cli.main tune --backend gpu --kernel softmax --shape $1 --policy $2 --budget $3 \
    --wall-seconds $4 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 | python3 -c "
import json, sys
r = json.loads(sys.stdin.read() or '{}'); b = r.get('best') or {}
print(f\"{r.get('shape', '$1'):12s} $2 {r.get('evaluations')} ev {r.get('wall_seconds')} s best {b.get('avg_us')} us {b.get('throughput')} GB/s it {b.get('iteration')} torch {r.get('vendor_us')}\"); print(json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
}
camp 2048x65536 expert 80 20
camp 1024x131072 expert 80 20
camp 256x262144 expert 80 20
camp 16x262144 expert 80 20
camp 65536x128 expert 80 15
camp 65536x128 optuna 200 35
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-call3.jsonl.gz | tail -1 | tee -a $log
cp $db /tmp/r/
echo "== quality of the campaign bests" | tee -a $log
timeout -s KILL 110 python3 bench/family_quality.py --kernel softmax --db $db --out /tmp/r/sm --min-ms 200 2>>/tmp/r/err.txt | tail -9 | tee -a $log
B1024='{"block_threads": 512, "chunks": 8, "cluster": 8, "load_hint": 1, "passes": 1, "row_threads": 512, "store_hint": true, "unroll": 1, "vec": 4}'
echo "== ncu 1024x131072" | tee -a $log
timeout -s KILL 60 python3 bench/ncu_sections.py --kernel softmax --shape 1024x131072 --out /tmp/r/ncu \
  --label reg-c8 --params "$B1024" 2>&1 | tail -3 | tee -a $log
rm -f /tmp/r/ncu/*.csv
tar czf $OUT/r.tgz -C /tmp r
