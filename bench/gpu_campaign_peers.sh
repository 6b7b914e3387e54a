#!/usr/bin/env bash
# On the GPU machine, from the repository root: GPU campaigns at a family's shapes (one shape
# set, or one campaign for one shape, from the family's baseline, embedded), then
# bench/peer_quality.py: their bests beside the family's vendor and peers, flushed and
# sustained, in the same call. The bests are timed twice: by the evaluation child, and as the
# library exported from the campaigns' database (`tuneforge library export`, in r/lib) called
# through its own loader, by the peers' harness (peer_quality --bundle): one timer for ours
# and theirs. $OUT/log.txt and $OUT/results.tgz (the campaigns' database gzipped, their JSON,
# the bundle, the peers' and ours); the two short tables last.
#
#   bash bench/gpu_campaign_peers.sh softmax \
#     65536x128,32768x512,16384x1024,65536x1024,8192x4096,8192x8192,4096x32768,2048x65536,1024x131072,16x262144,256x262144
#                     # the softmax sweep: BUDGET=600 WALL_S=235 PEER_S=260 (about 4.5 minutes)
#   BUDGET=400 WALL_S=240 PEER_S=200 bash bench/gpu_campaign_peers.sh gemm_bias_relu \
#     4096x4096x4096,8192x8192x8192,3000x5000x2000,2048x2048x8192
#   SPEC=examples/transpose BUDGET=300 WALL_S=60 PEER_S=100 \
#     bash bench/gpu_campaign_peers.sh transpose 8192x8192     # a user family, by its spec dir
#
# BUDGET: the campaigns' evaluations in all (default 50 a shape); WALL_S: their wall-clock
# budget (default 240 s; the step is killed 30 s past it); PEER_S: peer_quality's budget
# (default 200 s; killed 20 s past it). SPEC: a user family's spec directory, registered in the
# campaigns' database (`tuneforge family add`) and given to peer_quality (`--spec`).
# TUNEFORGE_COMMIT: the commit the records name (default: git's HEAD, where git is there).
# Carry .whl (../shared/DEVICE.md).
kernel=${1:-}
shapes=${2:-}
if [[ -z $kernel || -z $shapes || -n ${3:-} ]]; then
  echo "usage: [SPEC=DIR] [BUDGET=N] [WALL_S=S] [PEER_S=S] bash bench/gpu_campaign_peers.sh" \
       "KERNEL SHAPE[,SHAPE...]" >&2
  exit 2
fi
if [[ -n ${SPEC:-} && ! -f ${SPEC}/family.json ]]; then
  echo "SPEC=${SPEC}: no family.json there (a user family's spec directory)" >&2
  exit 2
fi
: "${OUT:?OUT: the folder whose files come back (the GPU machine sets it)}"
IFS=, read -r -a list <<< "$shapes"
budget=${BUDGET:-$(( 50 * ${#list[@]} ))}
wall=${WALL_S:-240}
peer_s=${PEER_S:-200}
# installed once a machine: a second call in the same command finds them there
[[ -d /tmp/site/sqlalchemy ]] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
export TUNEFORGE_COMMIT=${TUNEFORGE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

# What comes back from the GPU machine: $OUT/log.txt and $OUT/results.tgz, packed again after
# each step; the unpacked folder goes once the run ends (at most 8 files return from a call).
r=$OUT/r; mkdir -p "$r"; log=$r/log.txt; db=$r/tune.db
pack() { cp "$log" "$OUT/log.txt"; tar czf "$OUT/results.tgz" -C "$OUT" r; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u
  echo "$kernel at $shapes · budget $budget, $wall s · peers $peer_s s · $TUNEFORGE_COMMIT"; } | tee "$log"
t0=$(date +%s)
spec_args=()
if [[ -n ${SPEC:-} ]]; then
  python3 -m cli.main family add "$SPEC" --db "$db" 2>&1 | tail -2 | tee -a "$log"
  spec_args=(--spec "$SPEC")
fi
if (( ${#list[@]} == 1 )); then where=(--shape "$shapes"); else where=(--shapes "$shapes"); fi
timeout -s KILL $(( wall + 30 )) python3 -m cli.main tune --backend gpu --kernel "$kernel" \
  "${where[@]}" --budget "$budget" --wall-seconds "$wall" --db "$db" --out /tmp/tfout --json \
  2>"$r/tune-progress.txt" | tail -1 > "$r/tune.json"
python3 bench/tune_summary.py "$r/tune.json" 2>&1 | tee -a "$log"
echo "campaigns done at $(( $(date +%s) - t0 )) s" | tee -a "$log"
pack
python3 -m cli.main library export --kernel "$kernel" --db "$db" --out "$r/lib" 2>&1 | tail -2 \
  | tee -a "$log"
bundle_args=(); [[ -f $r/lib/dispatch.json ]] && bundle_args=(--bundle "$r/lib")
timeout -s KILL $(( peer_s + 20 )) python3 bench/peer_quality.py --family "$kernel" \
  "${spec_args[@]}" "${bundle_args[@]}" --campaigns "$db" --no-replay --shapes "$shapes" \
  --out "$r/q" --budget-s "$peer_s" 2>"$r/q-progress.txt" | tee -a "$log" \
  | tail -$(( 2 * ${#list[@]} + 10 ))
echo "peer_quality rc=${PIPESTATUS[0]} · all done at $(( $(date +%s) - t0 )) s" | tee -a "$log"
gzip -9 "$db"
pack
rm -rf "$r"  # packed: two runs in one device command return 4 files, within its 8
