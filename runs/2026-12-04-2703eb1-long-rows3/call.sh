#!/bin/bash
# the long rows' copy beside its read half (a load-only kernel) and write half
python3 bench/long_rows_bound.py --reps 100 --out $OUT/bound 2>&1 | tail -3
