#!/usr/bin/env bash
# nvidia-h100-x1 (asked for nvidia-h200), at 5dd5e49: bench/loader_bench.py with the strongest peer beside the vendor, then a small
# softmax set's library at 16 held-out shapes beside the vendor and the peer
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
r=$OUT/r; mkdir -p $r
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $r/log.txt
timeout -s KILL 170 python3 bench/loader_bench.py --budget-s 120 --out $r --work /tmp/lb > $r/loader_bench.txt 2>&1
echo "loader rc=$?" | tee -a $r/log.txt; tail -7 $r/loader_bench.txt | tee -a $r/log.txt
timeout -s KILL 150 python3 bench/library_held_out.py --probe --kernel softmax \
  --tune 8192x8192:2,16384x1024,65536x128,4096x32768 --budget 60 --held-out 16 \
  --work /tmp/ho-softmax --out $r/held-out-softmax > $r/held-out-softmax.txt 2>&1
echo "held-out rc=$?" | tee -a $r/log.txt; tail -5 $r/held-out-softmax.txt | tee -a $r/log.txt
