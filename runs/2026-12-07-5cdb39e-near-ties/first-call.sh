#!/usr/bin/env bash
# Run as `first-call.sh` (carry .whl and .ntlib), on any Hopper GPU: the 553da7c library of
# .ntlib with its GPU's name changed, so that the loader times each entry's near-ties: the
# first call's and the second call's wall time at four shapes, and what was timed and chosen.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
rm -rf /tmp/nt && cp -r .ntlib /tmp/nt && python3 - <<'PY' 2>&1 | tee $OUT/first-call.txt
import json, time, sys, warnings, torch
p = "/tmp/nt/dispatch.json"; d = json.load(open(p)); d["gpu"]["name"] += " (another)"; json.dump(d, open(p, "w"))
sys.path.insert(0, "/tmp/nt"); import tuneforge_loader as tl
warnings.simplefilter("ignore")
k = tl.load("/tmp/nt").softmax
print(torch.cuda.get_device_name(0))
for rows, cols in [(4096, 32768), (8192, 8192), (65536, 128), (16, 262144)]:
    x = torch.randn(rows, cols, device="cuda"); torch.cuda.synchronize()
    t0 = time.perf_counter(); k(x); torch.cuda.synchronize(); first = time.perf_counter() - t0
    t0 = time.perf_counter(); k(x); torch.cuda.synchronize(); second = time.perf_counter() - t0
    t = k.ties(0)[(rows, cols)]
    print(f"{rows}x{cols}: first call {first*1e3:.1f} ms, second {second*1e3:.2f} ms; runs {t['point']} (entry {k.entries[(rows, cols)]['point']}); us {t['us']}")
PY
