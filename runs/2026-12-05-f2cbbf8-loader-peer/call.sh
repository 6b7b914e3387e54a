#!/usr/bin/env bash
# asked for nvidia-h200 (ran on nvidia-h100-x1), at f2cbbf8: bench/loader_bench.py with the strongest peer beside the vendor
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $r/log.txt
timeout -s KILL 470 python3 bench/loader_bench.py --budget-s 300 --out $r --work /tmp/lb > $r/loader_bench.txt 2>&1
echo "rc=$?" | tee -a $r/log.txt; tail -12 $r/loader_bench.txt | tee -a $r/log.txt
