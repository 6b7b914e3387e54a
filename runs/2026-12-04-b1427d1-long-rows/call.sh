#!/bin/bash
# long rows: the copy of the same bytes beside its read and write halves; the best kernels at
# 16x262144 and 256x262144 flushed and sustained; Nsight Compute on both
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
S16='{"block_threads": 512, "row_threads": 512, "cluster": 16, "vec": 4, "passes": 1, "chunks": 8, "unroll": 1, "load_hint": 2, "store_hint": true, "min_ctas": 2, "spread": true}'
S256='{"block_threads": 512, "row_threads": 512, "cluster": 16, "vec": 4, "passes": 1, "chunks": 8, "unroll": 1, "load_hint": 1, "store_hint": true, "push": true}'
python3 bench/long_rows_bound.py --out $OUT/bound 2>&1 | tail -3
for pair in "16x262144|$S16" "256x262144|$S256"; do
  shape=${pair%%|*}; p=${pair#*|}
  timeout 90 python3 bench/family_quality.py --kernel softmax --min-ms 200 --params "$p" \
    --label best --shapes $shape --out $OUT/q-$shape > $OUT/q-$shape.txt 2>&1; tail -2 $OUT/q-$shape.txt
  timeout 120 python3 bench/ncu_sections.py --kernel softmax --shape $shape --params "$p" \
    --label best --out $OUT/ncu-$shape > $OUT/ncu-$shape.txt 2>&1; tail -14 $OUT/ncu-$shape.txt
done
