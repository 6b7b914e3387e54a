#!/usr/bin/env bash
# Run 2026-12-01/7723069: the softmax bulk-copy path (kernels/softmax, bulk > 0: rows staged in shared memory
# by cp.async.bulk on mbarriers) on the H200, in at most 5 minutes (the timeouts sum to 290 s).
# 1. GPU correctness: call6's check of run 2026-12-01/8ba5b81's -inf select guard (the awkward-shape test over
#    every transform's points, the bulk copies among them) and the bulk points' own awkward shapes.
# 2. bench/family_quality.py (every distribution checked, flushed median, sustained >= 150 ms,
#    torch.softmax and the copy rate in the same run) of hand-picked bulk points
#    (tests/softmax_bulk_points.py) beside run 2026-12-01/8ba5b81's campaign best at each shape; table last.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu PYTHONUNBUFFERED=1
echo "== GPU correctness" | tee $OUT/log.txt
timeout -s KILL 105 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution" \
  "tests/test_gpu_softmax.py::test_bulk_points_correct_on_awkward_shapes_and_every_distribution" \
  2>&1 | tail -4 | tee -a $OUT/log.txt

C4x512='{"block_threads": 512, "bulk": 4, "cluster": 4, "row_threads": 512, "unroll": 2, "vec": 4}'
C8x256='{"block_threads": 256, "bulk": 4, "cluster": 8, "row_threads": 256, "unroll": 2, "vec": 4}'
C8x512='{"block_threads": 512, "bulk": 4, "cluster": 8, "row_threads": 512, "unroll": 2, "vec": 4}'
C8x512P8='{"block_threads": 512, "bulk": 8, "cluster": 8, "row_threads": 512, "store_hint": true, "unroll": 2, "vec": 4}'
C8x1024P8='{"block_threads": 1024, "bulk": 8, "cluster": 8, "row_threads": 1024, "unroll": 2, "vec": 4}'
RT8x256='{"block_threads": 256, "bulk": 1, "row_threads": 8, "vec": 4}'
RT8x512P2='{"block_threads": 512, "bulk": 2, "row_threads": 8, "vec": 4}'
RT4x256P2='{"block_threads": 256, "bulk": 2, "row_threads": 4, "vec": 4}'
# run 2026-12-01/8ba5b81's campaign bests (runs/2026-12-01-8ba5b81/call3/softmax-quality.json)
S10_2048='{"block_threads": 512, "chunks": 1, "cluster": 4, "load_hint": 3, "passes": 2, "row_threads": 512, "store_hint": true, "unroll": 4, "vec": 2}'
S10_1024='{"block_threads": 512, "chunks": 1, "cluster": 4, "load_hint": 3, "passes": 2, "row_threads": 512, "store_hint": true, "unroll": 4, "vec": 4}'
S10_256='{"block_threads": 512, "chunks": 1, "cluster": 8, "load_hint": 0, "passes": 2, "row_threads": 512, "store_hint": true, "unroll": 4, "vec": 4}'
S10_16='{"block_threads": 512, "chunks": 1, "cluster": 8, "load_hint": 0, "passes": 1, "row_threads": 512, "store_hint": true, "unroll": 4, "vec": 4}'
S10_65536='{"block_threads": 32, "chunks": 4, "cluster": 1, "load_hint": 0, "passes": 1, "row_threads": 4, "store_hint": false, "unroll": 1, "vec": 4}'

q() {  # q SHAPE SECONDS LABEL PARAMS [LABEL PARAMS ...]: one family_quality run at SHAPE
  local shape=$1 secs=$2 args=()
  shift 2
  while [ $# -gt 0 ]; do args+=(--label "$1" --params "$2"); shift 2; done
  timeout -s KILL "$secs" python3 bench/family_quality.py --kernel softmax --out /tmp/q/$shape \
    --min-ms 150 --shapes "$shape" "${args[@]}" > /tmp/q/$shape.txt 2>>$OUT/q-err.txt
  echo "$shape: family_quality rc $?" | tee -a $OUT/log.txt
}
mkdir -p /tmp/q
echo "== timing" | tee -a $OUT/log.txt
q 2048x65536 45 s10-best "$S10_2048" c4x512 "$C4x512" c8x256 "$C8x256" c8x512p8 "$C8x512P8"
q 1024x131072 40 s10-best "$S10_1024" c8x512 "$C8x512" c8x256 "$C8x256" c8x512p8 "$C8x512P8"
q 256x262144 40 s10-best "$S10_256" c8x512 "$C8x512" c8x512p8 "$C8x512P8" c8x1024p8 "$C8x1024P8"
q 16x262144 30 s10-best "$S10_16" c8x512 "$C8x512" c8x512p8 "$C8x512P8" c8x1024p8 "$C8x1024P8"
q 65536x128 30 s10-best "$S10_65536" rt8x256 "$RT8x256" rt8x512p2 "$RT8x512P2" rt4x256p2 "$RT4x256P2"

python3 - "$OUT" <<'PY' | tee -a $OUT/log.txt
import glob, json, sys
out, rows, runs = sys.argv[1], [], []
for path in sorted(glob.glob("/tmp/q/*/quality.json")):
    data = json.load(open(path))
    runs.append({"shape": path.split("/")[-2], "device": data["device"]})
    rows += [{**r, "copy_gbs": data["device"].get("copy_gbs")} for r in data["rows"]]
json.dump({"runs": runs, "rows": rows}, open(f"{out}/quality.json", "w"), indent=1)
print(f"{'shape':>12s} {'label':11s} {'us':>8s} {'GB/s':>7s} {'%copy':>6s} {'x torch':>7s} "
      f"{'sus us':>8s} {'x torch':>7s} {'copy':>6s} {'worst err':>9s}")
for r in rows:
    perf, sus, ven = r.get("perf") or {}, r.get("sustained") or {}, r.get("vendor") or {}
    if not perf:
        print(f"{r['shape']:>12s} {r['label']:11s} {r.get('status', r.get('compile'))}: "
              f"{(r.get('error') or '')[:70]}")
        continue
    corr = r.get("correctness") or {}
    worst = max(corr.get("rel_err") or 0.0, corr.get("max_scaled_err") or 0.0)
    xf = ven["avg_us"] / perf["avg_us"] if ven.get("avg_us") else 0.0
    xs = (ven["sustained_us"] / sus["us_per_launch"]
          if ven.get("sustained_us") and sus.get("us_per_launch") else 0.0)
    print(f"{r['shape']:>12s} {r['label']:11s} {perf['avg_us']:8.1f} {perf['throughput']:7.0f} "
          f"{perf.get('pct_of_peak') or 0:6.1f} {xf:7.3f} {sus.get('us_per_launch') or 0:8.1f} "
          f"{xs:7.3f} {r['copy_gbs'] or 0:6.0f} {worst:9.2e}")
PY
