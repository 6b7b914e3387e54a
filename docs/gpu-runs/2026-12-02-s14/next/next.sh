#!/usr/bin/env bash
# For the next session (<= 420 s of timeouts; not run yet). 1. Sustained runs that last at least
# --min-ms. The child's `sustain` and the vendor's --sustain-ms size their run from a few
# launches and ran 118-199 ms when asked for 200 (session 14's quality.json files: the estimate
# is slower than back-to-back launches). sustain-at-least.patch makes a short run again at its
# own measured rate (worker.launch_contract.sustained_again, unit-tested on the CPU). Apply it
# (git apply docs/gpu-runs/2026-12-02-s14/next/sustain-at-least.patch), then run this: every
# row's sustained total_ms and the vendor's sustained_ms should read >= 200.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
mkdir -p /tmp/r
timeout -s KILL 100 python3 bench/family_quality.py --kernel softmax \
  --points docs/gpu-runs/2026-12-02-s14/cluster16.json --out /tmp/r/q --min-ms 200 | tail -9
python3 -c "
import json
for r in json.load(open('/tmp/r/q/quality.json'))['rows']:
    print(r['shape'], r['label'], r['sustained']['total_ms'], r['vendor'].get('sustained_ms'))
" | tee $OUT/log.txt
# compute-sanitizer memcheck and racecheck on the fastest point of every shape of the softmax
# replay dataset: session 14's bests (the push kernels' relaxed first arrival, clusters of 16)
# have not been through it
timeout -s KILL 200 python3 bench/sanitize_bests.py --kernel softmax --out /tmp/r/san 2>&1 | tail -13 | tee -a $OUT/log.txt
# the ncu launcher's configure() (6b5037b) on a cluster of 16, and the split-pass GEMM (its
# dynamic shared memory through the same call)
p=$(python3 -c "import json; print(json.dumps(json.load(open('docs/gpu-runs/2026-12-02-s14/cluster16.json'))[0]['params']))")
timeout -s KILL 45 python3 bench/ncu_sections.py --kernel softmax --shape 256x262144 --out /tmp/r/ncu16 \
  --label c16 --params "$p" 2>&1 | tail -4 | tee -a $OUT/log.txt
timeout -s KILL 55 python3 bench/ncu_sections.py --out /tmp/r/ncu-gemm --label pass-best \
  --params "$(cat docs/gpu-runs/2026-12-02-s13/call4/r/best-t1e-4.json)" 2>&1 | tail -4 | tee -a $OUT/log.txt
