#!/usr/bin/env bash
# Session 10, call 2: softmax campaigns over the sweep (expert policy, GPU backend, one DB),
# then GPU tests of the generic child (softmax correctness and timing; GEMM split-K, stream-K).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
log=$OUT/log.txt
tune() {  # shape budget wall
  timeout -s KILL $(( $3 + 60 )) python3 -m cli.main tune --backend gpu --kernel softmax --shape $1 \
    --budget $2 --wall-seconds $3 --db $OUT/softmax.db --out /tmp/tfout --json 2>>$OUT/tune-err.txt \
    | tail -1 > /tmp/r.json
  python3 - "$1" <<'PY' | tee -a $log
import json, sys
try:
    r = json.load(open("/tmp/r.json"))
except Exception as e:
    print(sys.argv[1], "no result", e); raise SystemExit
b = r.get("best") or {}
print(f"{sys.argv[1]:14s} {r['status']:6s} {r['evaluations']:3d} ev {r['wall_seconds']}s best {b.get('avg_us')} us "
      f"{b.get('throughput')} GB/s it {b.get('iteration')} torch {r.get('vendor_us')} us pct {r.get('pct_of_vendor')} "
      f"{(r.get('reason') or '')[:80]}")
print("   ", json.dumps(b.get("params"), sort_keys=True))
PY
}
for s in 65536x128 32768x512 16384x1024 65536x1024 8192x4096 8192x8192 4096x32768 2048x65536 1024x131072 256x262144 16x262144; do
  tune $s 80 20
done
echo "== GPU tests" | tee -a $log
timeout -s KILL 130 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=6 \
  tests/test_gpu_softmax.py tests/test_gpu_split_k.py tests/test_gpu_stream_k.py 2>&1 | tail -30 >> $log
tail -4 $log
tail -c 6000 $OUT/tune-err.txt > $OUT/tune-err-tail.txt; rm -f $OUT/tune-err.txt
