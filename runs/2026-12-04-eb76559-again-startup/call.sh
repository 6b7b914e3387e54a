#!/usr/bin/env bash
# 2026-12-04, nvidia-h200: where a re-submitted GPU shape set's time goes outside the set
# itself: a 2-shape softmax set of 40 evaluations, then the same command again (every
# evaluation served) three times: plainly, under `python -X importtime`, and under py-spy
# (every thread and the GPU child, idle frames included, raw stacks).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
r=$OUT/r; mkdir -p $r
cmd="python3 -m cli.main tune --backend gpu --kernel softmax --shapes 8192x8192,16384x1024 --budget 40 --db /tmp/again.db --out /tmp/tfout --json"
ts() { date +%s.%N; }
t0=$(ts); $cmd > $r/first.json 2>$r/first.err; t1=$(ts)
echo "first: $(echo "$t1 - $t0" | bc) s" | tee $r/log.txt
for i in 1 2; do
  t0=$(ts); $cmd > $r/again$i.json 2>$r/again$i.err; t1=$(ts)
  echo "again $i: $(echo "$t1 - $t0" | bc) s" | tee -a $r/log.txt
done
python3 -c "
import json; r = json.load(open('$r/again2.json'.replace('again2','again2')) if False else open('$r/again2.json'))
print({k: r.get(k) for k in ('evaluations', 'served_from_history', 'gpu_seconds', 'wall_seconds')})" 2>&1 | tail -1 | tee -a $r/log.txt
t0=$(ts); python3 -X importtime -m cli.main tune --backend gpu --kernel softmax --shapes 8192x8192,16384x1024 --budget 40 --db /tmp/again.db --out /tmp/tfout --json > /dev/null 2>$r/importtime.txt; t1=$(ts)
echo "again under importtime: $(echo "$t1 - $t0" | bc) s" | tee -a $r/log.txt
sort -t'|' -k2 -n -r $r/importtime.txt | head -15 | tee -a $r/log.txt
t0=$(ts); timeout 60 /tmp/site/bin/py-spy record --idle --subprocesses --threads --rate 200 --format raw -o $r/pyspy.raw -- $cmd > /dev/null 2>$r/pyspy.err; t1=$(ts)
echo "again under py-spy: $(echo "$t1 - $t0" | bc) s, exit $?" | tee -a $r/log.txt
tail -3 $r/pyspy.err | tee -a $r/log.txt
ls -la $r | tee -a $r/log.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $r
