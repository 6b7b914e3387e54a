#!/usr/bin/env bash
# at 4b91932: the GEMM beside every composition peer with the per-shape compiled one at
# dynamic=False, then the loader bench with the compiled composition as the GEMM's peer
# (one compiled function for every shape). Carry .whl (docs: ../shared/DEVICE.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
export TUNEFORGE_COMMIT=4b91932
r=$OUT/r; mkdir -p $r
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; date -u; } | tee $r/log.txt
timeout -s KILL 250 python3 bench/peer_quality.py --family gemm_bias_relu --budget-s 200 \
  --out $r/q 2> $r/progress.txt | tee -a $r/log.txt | tail -14
echo "peer_quality rc=${PIPESTATUS[0]}" | tee -a $r/log.txt
tar czf $OUT/results.tgz -C $OUT r
timeout -s KILL 280 python3 bench/loader_bench.py --budget-s 180 --out $r --work /tmp/lb \
  > $r/loader_bench.txt 2>&1
echo "loader rc=$?" | tee -a $r/log.txt; tail -9 $r/loader_bench.txt | tee -a $r/log.txt
tar czf $OUT/results.tgz -C $OUT r && cp $r/log.txt $OUT/log.txt && rm -rf $r
