#!/usr/bin/env bash
# 2026-12-04, nvidia-h200, at the commit that adds it: sweep.py's 56 held-row arrangements at
# the four short-row shapes, each with the four code moves, beside torch.softmax,
# torch.compile, Triton and the copy (bench/peer_quality.py --points); then Inductor's
# generated softmax kernels for those shapes (the cache's .py files), to read their launch
# configuration.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD TUNEFORGE_HOME=/tmp/tfhome PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
d=runs/2026-12-04-5d16e22-softmax-moves
r=$OUT/r2; mkdir -p $r; log=$r/log.txt
shapes=65536x128,32768x512,16384x1024,65536x1024
timeout -s KILL 300 python3 bench/peer_quality.py --family softmax --points $d/points.json \
  --shapes "$shapes" --no-replay --out "$r/q" --budget-s 280 2>"$r/q-progress.txt" > $r/q.txt
tail -62 $r/q.txt | tee -a $log | grep -E "x compile|geomean|compile |torch.softmax" | head -5
python3 - "$r/q/peer_quality.json" <<'PY' | tee -a $log
import json, sys
q = json.load(open(sys.argv[1]))
rows = q["families"]["softmax"]["summary"]
best = {}
for s in rows:
    if s.get("us") and s.get("x"):
        c = s["x"].get("torch.compile") or [0, 0]
        if s["shape"] not in best or s["us"] < best[s["shape"]]["us"]:
            best[s["shape"]] = s
for shape, s in best.items():
    print(shape, s["label"], s["us"], s["sustained_us"], "x compile", s["x"].get("torch.compile"), "x triton", s["x"].get("triton"))
PY
mkdir -p $r/inductor
grep -l -r "softmax\|amax" /tmp/inductor --include=*.py 2>/dev/null | head -20 | while read f; do cp "$f" $r/inductor/; done
ls $r/inductor | head; grep -h "XBLOCK\|R0_BLOCK\|RBLOCK\|num_warps\|triton_meta\|grid" $r/inductor/*.py 2>/dev/null | sort | uniq -c | sort -rn | head -30 | tee -a $log
tar czf $OUT/r2.tgz -C $OUT r2 && rm -rf $r
