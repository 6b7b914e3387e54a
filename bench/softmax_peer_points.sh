#!/usr/bin/env bash
# softmax on one H200, in one call (about 6-7 minutes, at most 8 by the timeouts): 1. the
# points the rule book reaches first from the baseline at the eleven replay shapes that the
# replay dataset lacks (one row a CTA in Triton's warp counts and their neighbours first),
# measured as replay rows by bench/measure_neighbourhoods.py; 2. GPU campaigns at the eleven
# shapes (one shape set, ~27 evaluations a shape) and their candidates as replay rows
# (bench/replay_from_campaigns.py); 3. bench/peer_quality.py: the campaigns' bests and the
# replay's beside torch, torch.compile and Triton.
#
#   bash bench/softmax_peer_points.sh COMMIT      # on the GPU machine, .whl carried; needs $OUT
#
# Under $OUT: log.txt (the short tables; peer_quality's last), rules.jsonl.gz and
# campaigns.jsonl.gz (replay rows: merge each with bench/merge_replay.py), tune.db (the
# campaigns), tune.json (the set's summary), q/peer_quality.json and q/peers.json, and the
# progress of each step (*-progress.txt).
set -u
: "${OUT:?set OUT to the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=${1:-unknown} TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
shapes=65536x128,32768x512,16384x1024,65536x1024,8192x4096,8192x8192,4096x32768,2048x65536
shapes=$shapes,1024x131072,16x262144,256x262144
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log"
t0=$(date +%s)

# 1. the rule book's first points a shape that the dataset lacks (~110 s: the vendor timed
#    at every shape first, then 40 s of measurements)
timeout -s KILL 120 python3 bench/measure_neighbourhoods.py --kernel softmax --shape "$shapes" \
  --limit 12 --seconds 40 --out "$OUT/rules.jsonl.gz" 2>"$OUT/rules-progress.txt" \
  | tee -a "$log"
echo "step 1 done at $(( $(date +%s) - t0 )) s" | tee -a "$log"

# 2. the campaigns (~140 s) and their rows
timeout -s KILL 170 python3 -m cli.main tune --backend gpu --kernel softmax --shapes "$shapes" \
  --budget 300 --wall-seconds 150 --db "$OUT/tune.db" --out /tmp/tfout --json \
  2>"$OUT/tune-progress.txt" | tail -1 > "$OUT/tune.json"
python3 bench/tune_summary.py "$OUT/tune.json" --params 2>&1 | tee -a "$log"
timeout -s KILL 60 python3 bench/replay_from_campaigns.py --kernel softmax --db "$OUT/tune.db" \
  --out "$OUT/campaigns.jsonl.gz" | tail -14 | tee -a "$log"
echo "step 2 done at $(( $(date +%s) - t0 )) s" | tee -a "$log"

# 3. the campaigns' bests and the replay's beside the peers (~130 s)
timeout -s KILL 215 python3 bench/peer_quality.py --family softmax --campaigns "$OUT/tune.db" \
  --out "$OUT/q" --budget-s 200 2>"$OUT/q-progress.txt" | tee -a "$log" | tail -40
tail -3 "$OUT/q-progress.txt" | tee -a "$log"
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a "$log"
