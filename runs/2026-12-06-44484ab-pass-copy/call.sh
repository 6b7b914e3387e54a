#!/usr/bin/env bash
# at 44484ab, on the GPU a call for an H200 found when it was not one: bench/pass_boundary.py at the
# four "pass s8" points of bench/sustained_clock_points.json, with its copy of the same bytes.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
python3 -c "
import json; p=json.load(open('bench/sustained_clock_points.json'))
json.dump([x for x in p if x['label']=='pass s8'], open('/tmp/pts.json','w'))"
timeout -s KILL 150 python3 bench/pass_boundary.py --points /tmp/pts.json --reps 20 --out $OUT/pb 2>&1 | tail -8
