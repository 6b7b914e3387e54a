#!/usr/bin/env bash
# Device call 4 (nvidia-h200): GPU faults inside a real embedded campaign (issue 7 item 1).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/pip.log 2>&1 || { tail -20 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/src PYTHONUNBUFFERED=1 TUNEFORGE_GPU_OUT=$OUT
cd .gpu/src
echo "tree $(cat ../commit.txt) + tests/test_gpu_campaign_faults.py"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_campaign_faults.py 2>&1 | tee "$OUT/gpu-campaign-faults.log" | tail -30
python3 -c "
import json; import glob; f=(glob.glob('$OUT/campaign_faults.json')+glob.glob('/tmp/tf-gpu-out/campaign_faults.json')+glob.glob('/tmp/**/campaign_faults.json', recursive=True))[0]; print(f); d=json.load(open(f)); open('$OUT/campaign_faults.json','w').write(json.dumps(d, indent=1))
print({k: v for k, v in d.items() if k != 'candidates'})
for r in d['candidates']: print(r['iteration'], r['status'], r['planted'], r['action'], r['avg_us'], r['error'][:90])
" 2>&1 | tail -20
