#!/usr/bin/env bash
# On the GPU machine, from the repository root: (a) a shape set against one campaign a shape
# (bench/shape_sets.py --backend gpu), for an 8-shape GEMM set or a 12-shape softmax set, the
# set's database kept; (b) the set's exported library at 16 held-out shapes beside its set
# shapes (bench/library_held_out.py). $OUT/log.txt and $OUT/results.tgz; a short table last.
#
#   bash bench/gpu_sets_heldout.sh softmax    # one family a call: about 5.5 minutes
#   bash bench/gpu_sets_heldout.sh gemm       # about 4.5 minutes
#
# Both families no longer fit one call: with the held-out steps timing the peer, the GEMM's
# steps took 281 s and the softmax set was killed at the 190 s left to it (2026-12-05,
# e77de8c, runs/2026-12-05-e77de8c-sets-heldout), so the script asks for one of them.
#
# Budgets (override by the environment; why these: docs/BENCHMARKS.md, "Shape sets and the
# team's history"): the softmax set 60 / 330 (separate campaigns / the set, 12 shapes); the
# GEMM 32 / 120, 4096³ weighted 3 (it runs first and climbs from the naive baseline, 36
# evaluations; the others start from its best, 12 each). Every step runs under `timeout -s
# KILL`, capped by its own limit and by what is left of the call's 530 s (TOTAL_S) less what
# the steps after it are expected to need; each writes its JSON as it goes. PROBED_S: the probed held-out step's cap
# (180 s softmax, 200 s GEMM: their probes alone took 72 and 81 s on 2026-12-05; the probe
# measures every pick before the export).
# SEPARATE_FROM: an earlier run's shape-sets.json whose separate campaigns the set step takes
# (bench/shape_sets.py --separate-from; the same family and budget). AGAIN_RUNS: how many
# times the set is submitted again, each on the history its first submission left (median
# and the set's own seconds in shape-sets.json; bench/shape_sets.py --again-runs). HELD_OUT=0:
# the set steps only, no held-out library.
#
#   SEPARATE_FROM=$PWD/runs/2026-12-04-23167d9-gemm-set/a/sets-gemm/shape-sets.json \
#     GEMM_BUDGET=160 GEMM_SET_BUDGET=440 AGAIN_RUNS=5 HELD_OUT=0 bash bench/gpu_sets_heldout.sh gemm
#                                             # the 440-evaluation GEMM set, then 5 times again
which=${1:-}
if [[ $which != gemm && $which != softmax ]]; then
  echo "usage: bash bench/gpu_sets_heldout.sh gemm|softmax (one family a call: both take" \
       "more than one call's 10 minutes)" >&2
  exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1

# What comes back from the GPU machine: $OUT/log.txt and $OUT/results.tgz (everything the
# steps wrote, packed again after each step), since at most 8 files return from a call.
RESULT=${OUT:-/tmp/out}
mkdir -p "$RESULT"
OUT=$(mktemp -d /tmp/sets-heldout-out.XXXXXX)
pack() { tar czf "$RESULT/results.tgz" -C "$OUT" . && cp "$OUT/log.txt" "$RESULT/log.txt"; }
deadline=$(( $(date +%s) + ${TOTAL_S:-530} ))
keep=$(mktemp -d /tmp/sets-heldout.XXXXXX)

GEMM_SHAPES=${GEMM_SHAPES:-4096x4096x4096:3,2048x2048x8192,3000x5000x2000,2048x2048x2048,1024x4096x4096,16384x1024x1024,128x4096x4096,1024x1024x1024}
GEMM_BUDGET=${GEMM_BUDGET:-32}
GEMM_SET_BUDGET=${GEMM_SET_BUDGET:-120}
SOFTMAX_SHAPES=${SOFTMAX_SHAPES:-8192x8192,8192x4096,4096x4096,16384x1024,32768x512,65536x128,65536x1024,4096x32768,2048x65536,1024x131072,256x262144,16x262144}
SOFTMAX_BUDGET=${SOFTMAX_BUDGET:-60} SOFTMAX_SET_BUDGET=${SOFTMAX_SET_BUDGET:-330} softmax_s=280
HELD_OUT=${HELD_OUT:-16}
AGAIN_RUNS=${AGAIN_RUNS:-1}
BACKEND=${BACKEND:-gpu}  # replay: the flow on a machine without a GPU (softmax, replay shapes)

# name | cap (s) | expected (s) | command
steps=()
if [[ $which == gemm ]]; then
  steps+=("sets-gemm|300|190|python3 bench/shape_sets.py --kernel gemm_bias_relu --backend $BACKEND --shapes $GEMM_SHAPES --budget $GEMM_BUDGET --set-budget $GEMM_SET_BUDGET --keep $keep/gemm --out $OUT/sets-gemm --again-runs $AGAIN_RUNS${SEPARATE_FROM:+ --separate-from $SEPARATE_FROM}")
fi
if [[ $which == gemm && $HELD_OUT != 0 ]]; then
  steps+=("heldout-gemm|110|35|python3 bench/library_held_out.py --kernel gemm_bias_relu --db $keep/gemm/set.db --home $keep/gemm --held-out $HELD_OUT --work $keep/gemm-bundle --out $OUT/heldout-gemm")
  steps+=("heldout-gemm-probed|${PROBED_S:-200}|150|python3 bench/library_held_out.py --probe --kernel gemm_bias_relu --db $keep/gemm/set.db --home $keep/gemm --held-out $HELD_OUT --work $keep/gemm-bundle-probed --out $OUT/heldout-gemm-probed")
fi
if [[ $which == softmax ]]; then
  steps+=("sets-softmax|400|$softmax_s|python3 bench/shape_sets.py --kernel softmax --backend $BACKEND --shapes $SOFTMAX_SHAPES --budget $SOFTMAX_BUDGET --set-budget $SOFTMAX_SET_BUDGET --keep $keep/softmax --out $OUT/sets-softmax --again-runs $AGAIN_RUNS${SEPARATE_FROM:+ --separate-from $SEPARATE_FROM}")
fi
if [[ $which == softmax && $HELD_OUT != 0 ]]; then
  steps+=("heldout-softmax-probed|${PROBED_S:-180}|120|python3 bench/library_held_out.py --probe --kernel softmax --db $keep/softmax/set.db --home $keep/softmax --held-out $HELD_OUT --work $keep/softmax-bundle-probed --out $OUT/heldout-softmax-probed")
fi

log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; date -u; } 2>&1 | tee "$log"
for i in "${!steps[@]}"; do
  IFS='|' read -r name cap _ cmd <<< "${steps[$i]}"
  later=0
  for later_step in "${steps[@]:$((i + 1))}"; do
    IFS='|' read -r _ _ expected _ <<< "$later_step"
    later=$(( later + expected ))
  done
  left=$(( deadline - $(date +%s) - later ))
  limit=$(( cap < left ? cap : left ))
  if (( limit < 20 )); then
    echo "$name: skipped, $limit s left for it" | tee -a "$log"
    continue
  fi
  echo "$name: up to $limit s: $cmd" | tee -a "$log"
  start=$(date +%s)
  timeout -s KILL "$limit" $cmd > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$log"
  tail -4 "$OUT/$name.log" | sed 's/^/  /' | tee -a "$log"
  pack
done

python3 - "$OUT" <<'EOF' 2>&1 | tee -a "$log"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("\n(a) shape set against separate campaigns (H200)")
print(f"{'family':16} {'shapes':>6} {'worst set/sep':>13} {'GPU-s sep/set':>15} {'ratio':>6} "
      f"{'again s / GPU-s':>16} {'targets'}")
for fam in ("gemm", "softmax"):
    p = out / f"sets-{fam}" / "shape-sets.json"
    if not p.exists():
        continue
    r = json.loads(p.read_text()); t = r["totals"]
    sep, st, ag = t.get("separate", {}), t.get("set", {}), t.get("set_again", {})
    again = f"{ag['wall_s']:.1f} / {ag['gpu_seconds']:.2f}" if ag else "-"
    if ag.get("repeats"):
        rep = ag["repeats"]
        again = f"{rep['median_wall_s']:.1f} / {ag['gpu_seconds']:.2f}"
        print(f"  {r['kernel']} again {len(rep['runs'])} times: median {rep['median_wall_s']} s "
              f"wall, the set's own {rep['median_set_s']} s, "
              f"{rep['median_ms_per_evaluation']} ms a served evaluation")
    targets = ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in r["targets"].items())
    print(f"{r['kernel']:16} {len(r['shapes']) or len(r['separate']):>6} "
          f"{r['worst_set_over_separate']:>13.3f} "
          f"{sep.get('gpu_seconds', 0):>7.1f}/{st.get('gpu_seconds', float('nan')):<7.1f} "
          f"{r['gpu_seconds_ratio'] or float('nan'):>6.3f} {again:>16} "
          f"{targets or 'incomplete'}")
print("\n(b) the exported library: loader x vendor, geometric means (sustained / flushed)")
print(f"{'run':16} {'in set':>22} {'held out':>22} {'near':>14} {'far':>14} {'wrong':>5}")
for p in sorted(out.glob("heldout-*/held-out.json")):
    r = json.loads(p.read_text()); s = r["summary"]
    if not s:
        print(f"{r['kernel']:16} not measured"); continue
    cell = lambda g, w: (f"{s[g]['gm_x_vendor_sustained']:.3f}/{s[g]['gm_x_vendor_flushed']:.3f}"
                         f" ({s[g]['with_entry']}/{s[g]['shapes']})").rjust(w)
    print(f"{p.parent.name[8:]:16} {cell('in_set', 22)} {cell('held_out', 22)} "
          f"{s['near']['gm_x_vendor_sustained']:>14.3f} {s['far']['gm_x_vendor_sustained']:>14.3f} "
          f"{s['in_set']['wrong'] + s['held_out']['wrong']:>5}")
print("  (n/m): shapes with a dispatch entry / shapes; the others run the vendor")
EOF
pack
