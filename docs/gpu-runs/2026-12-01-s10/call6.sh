#!/usr/bin/env bash
# Session 10, call 6: the register-held softmax kernel with the -inf guard as a select (no spills),
# checked on every awkward shape and distribution, and two of call 3's one-pass bests re-timed.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export TUNEFORGE_HOME=/tmp/tfhome TUNEFORGE_GPU_OUT=$OUT/gpu
timeout -s KILL 60 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gpu_softmax.py::test_points_correct_on_awkward_shapes_and_every_distribution" 2>&1 | tail -2 | tee $OUT/log.txt
timeout -s KILL 70 python3 bench/family_quality.py --kernel softmax --out $OUT --min-ms 300 \
  --params '{"block_threads": 256, "chunks": 4, "cluster": 1, "load_hint": 3, "passes": 1, "row_threads": 256, "store_hint": true, "unroll": 2, "vec": 4}' --label c3-8192sq --shapes 8192x8192 \
  2>$OUT/q-err.txt | tail -3 | tee -a $OUT/log.txt
timeout -s KILL 50 python3 bench/family_quality.py --kernel softmax --out $OUT/b --min-ms 300 \
  --params '{"block_threads": 32, "chunks": 8, "cluster": 1, "load_hint": 0, "passes": 1, "row_threads": 32, "store_hint": false, "unroll": 1, "vec": 4}' --label c3-65536x1024 --shapes 65536x1024 \
  2>>$OUT/q-err.txt | tail -3 | tee -a $OUT/log.txt
