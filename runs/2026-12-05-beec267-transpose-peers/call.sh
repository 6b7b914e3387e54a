#!/usr/bin/env bash
# at beec267: the user family examples/transpose (declared without Python), a GPU campaign of
# 300 from its baseline at 8192x8192, then bench/peer_quality.py: the
# campaigns' bests beside torch's transpose copy, torch.compile, the Triton tiled transpose and
# the same-bytes copy, flushed and sustained. Carry .whl (../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TUNEFORGE_COMMIT=beec267 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r; log=$r/log.txt; db=$r/tune.db
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $log
t0=$(date +%s)
python3 -m cli.main family add examples/transpose --db "$db" 2>&1 | tail -2 | tee -a $log
for shape in 8192x8192; do
  timeout -s KILL 75 python3 -m cli.main tune --backend gpu --kernel transpose --shape $shape \
    --budget 300 --wall-seconds 60 --db "$db" --out /tmp/tfout --json \
    2>>"$r/tune-progress.txt" | tail -1 > "$r/tune-$shape.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); b=r.get('best') or {}; print(sys.argv[2], r.get('status'), r.get('evaluations'), 'evals', r.get('wall_seconds'), 's, best', b.get('avg_us'), 'us', b.get('params'))" "$r/tune-$shape.json" $shape 2>&1 | tee -a $log
done
echo "campaigns done at $(( $(date +%s) - t0 )) s" | tee -a $log
tar czf $OUT/results.tgz -C $OUT r
timeout -s KILL 115 python3 bench/peer_quality.py --family transpose --spec examples/transpose \
  --campaigns "$db" --no-replay --shapes 8192x8192 --out "$r/q" --budget-s 100 \
  2>"$r/q-progress.txt" | tee -a $log | tail -8
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a $log
gzip -9 $db
tar czf $OUT/results.tgz -C $OUT r && cp $log $OUT/log.txt && rm -rf $r
