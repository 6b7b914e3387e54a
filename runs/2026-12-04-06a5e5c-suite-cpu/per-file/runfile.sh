#!/bin/bash
# run one test file alone, log user sys wall of pytest + waited-for children
f=$1
cd /work/wt/suite
out=per-file/$(echo "$f" | tr / _).out
export TFM_FILE=$f PATH=<this folder, nvcc-shim.sh as nvcc>:$PATH
/usr/bin/time -f '%U %S %e' -o per-file/$(echo "$f" | tr / _).time .venv/bin/pytest -q -p no:cacheprovider "$f" > "$out" 2>&1
echo "$f $(tail -1 per-file/$(echo "$f" | tr / _).time) $(tail -1 "$out")" >> per-file/table.txt
