#!/usr/bin/env bash
# Session 10, call 5: a softmax campaign at 65536x128 with the rule that packs more rows into
# small CTAs (the rule book of 8ba5b81), its best beside torch.softmax (flushed and sustained).
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome
db=/tmp/short.db
timeout -s KILL 70 python3 -m cli.main tune --backend gpu --kernel softmax --shape 65536x128 --budget 100 \
  --wall-seconds 25 --db $db --out /tmp/tfout --json 2>$OUT/tune-err.txt | tail -1 > $OUT/campaign.json
python3 -c "import json; r=json.load(open('$OUT/campaign.json')); b=r['best']; print(r['evaluations'], 'ev', r['wall_seconds'], 's', b['avg_us'], 'us', b['throughput'], 'GB/s it', b['iteration'], 'pct', r['pct_of_vendor']); print(json.dumps(b['params'], sort_keys=True))" | tee $OUT/log.txt
python3 bench/replay_from_campaigns.py --kernel softmax --db $db --out $OUT/replay-65536x128.jsonl.gz | tail -2 | tee -a $OUT/log.txt
timeout -s KILL 60 python3 bench/family_quality.py --kernel softmax --db $db --out $OUT --min-ms 300 2>$OUT/q-err.txt | tail -4 | tee -a $OUT/log.txt
