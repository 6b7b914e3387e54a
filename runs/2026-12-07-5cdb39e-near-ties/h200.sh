#!/usr/bin/env bash
# Run as `h200.sh COMMIT` (carry .whl and .ntlib): on an H200 only (another GPU exits 3), the
# 553da7c softmax library (its eleven shapes tuned on an H100), exported at COMMIT with its
# near-ties into .ntlib (`tuneforge library export --kernel softmax --db <553da7c tune.db>
# --out .ntlib`), timed through its own loader in the peers' harness beside torch.softmax,
# torch.compile, the Triton launches and the same-bytes copy, flushed and sustained, as at
# 75fb699 (where the same library without near-ties ran 0.94x and 0.89x Triton at 8192x8192
# and 4096x32768); then each shape's near-tie timing on this GPU (ties.txt). SHAPES (comma-
# separated) times those shapes alone, LIMIT and BUDGET bound the harness's time.
commit=${1:?usage: h200.sh COMMIT}
start=$(date +%s)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
if [[ "$name" != *H200* ]]; then echo "not an H200: nothing run"; exit 3; fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TUNEFORGE_COMMIT=$commit
log=$OUT/log.txt
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; date -u; echo "commit $commit"; } | tee $log
gunzip -c runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz > /tmp/sm.db
cp .ntlib/dispatch.json $OUT/
timeout -s KILL ${LIMIT:-300} python3 bench/peer_quality.py --family softmax --campaigns /tmp/sm.db \
  --no-replay --bundle .ntlib --budget-s ${BUDGET:-240} --out $OUT/q 2>$OUT/progress.txt \
  ${SHAPES:+--shapes $SHAPES} \
  > $OUT/softmax.txt
echo "softmax rc $? at $(( $(date +%s) - start ))s" | tee -a $log
python3 - <<'PY' 2>&1 | tee -a $log
import json, os
path = os.path.join(os.environ["OUT"], "q", "peers.json")
if os.path.exists(path):
    for shape, row in json.load(open(path))["families"]["softmax"]["shapes"].items():
        print(f"{shape:>12s}  the harness's call ran: {row['peers'].get('tuneforge library', {}).get('runs')}")
PY
python3 - <<'PY' 2>&1 | tee $OUT/ties.txt
import logging, sys, warnings
import torch
sys.path.insert(0, ".ntlib")
import tuneforge_loader
logging.basicConfig(level=logging.INFO, format="%(message)s")
warnings.simplefilter("ignore")
kernel = tuneforge_loader.load(".ntlib").softmax
for (rows, cols), entry in kernel.entries.items():
    x = torch.randn(rows, cols, device="cuda")
    y = kernel(x)
    torch.cuda.synchronize()
    err = (y.double() - torch.softmax(x.double(), -1)).abs().max().item()
    t = kernel.ties(0).get((rows, cols))
    print(f"{rows}x{cols}: entry {entry['point']}, runs {t['point'] if t else entry['point']}"
          f"{' (a near-tie)' if t and t['point'] != entry['point'] else ''}, err {err:.1e}, "
          f"us {t['us'] if t else '-'}")
PY
echo "ties at $(( $(date +%s) - start ))s" | tee -a $log
tail -32 $OUT/softmax.txt
