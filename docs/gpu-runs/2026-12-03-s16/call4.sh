#!/usr/bin/env bash
# Session 16, call 4 (<= 560 s of timeouts): 1. campaigns at 1024x131072 and 2048x65536, where
# the rule book now offers the prefetching point too. 2. The sweep of every shape's campaign
# best in one run beside torch and the copy (sweep.json: session 14's bests, this session's
# campaigns where they ran). 3. compute-sanitizer memcheck and racecheck on the fastest point
# of every shape of the replay dataset (session 14's bests and this session's). 4. Nsight
# Compute on the 256x262144 best (SM activity, clusters that fit). Argument: the commit.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TUNEFORGE_COMMIT=$1
log=$OUT/log.txt; d=docs/gpu-runs/2026-12-03-s16; db=/tmp/r/softmax.db; mkdir -p /tmp/r
for s in 1024x131072 2048x65536; do
  timeout -s KILL 55 python3 -m cli.main tune --backend gpu --kernel softmax --shape $s --budget 100 \
    --wall-seconds 30 --db $db --out /tmp/tfout --json 2>>/tmp/r/tune-err.txt | tail -1 > /tmp/r/tune-$s.json
  python3 -c "import json; r=json.load(open('/tmp/r/tune-$s.json')); b=r.get('best') or {}; print('$s', r.get('evaluations'), b.get('avg_us'), b.get('throughput'), json.dumps(b.get('params'), sort_keys=True))" | tee -a $log
done
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out /tmp/r/replay-s16b.jsonl.gz | tail -1 | tee -a $log
python3 $d/sweep_points.py /tmp/r > /tmp/r/sweep.json
timeout -s KILL 200 python3 bench/family_quality.py --kernel softmax --points /tmp/r/sweep.json \
  --out /tmp/r/quality --min-ms 200 2>>/tmp/r/err.txt | tail -16 | tee -a $log
timeout -s KILL 150 python3 bench/sanitize_bests.py --kernel softmax --out /tmp/r/san 2>&1 | tail -13 | tee -a $log
p=$(python3 -c "import json; print(json.dumps(json.load(open('$d/call1/r/tune-256x262144.json'))['best']['params']))")
timeout -s KILL 45 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu \
  --label best --params "$p" 2>&1 | tail -6 | tee -a $log
tar czf $OUT/r.tgz -C /tmp r
