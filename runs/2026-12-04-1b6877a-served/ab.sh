#!/usr/bin/env bash
# usage: ab.sh N fam label=dir ... : builds history once per label (first submission timed), then N interleaved rounds of again on copies
N=$1; fam=$2; shift 2
S=1024x131072,16384x1024,16x262144,2048x65536,256x262144,32768x512,4096x32768,65536x1024,65536x128,8192x4096,8192x8192
if [ $fam = softmax ]; then A=(--kernel softmax --shapes $S --budget 380 --parallel ${PAR:-9}); else A=(--kernel gemm_bias_relu --shapes 4096x4096x4096 --budget 440 --parallel ${PAR:-9}); fi
W=/tmp/ag/ab-$fam; rm -rf $W; mkdir -p $W
one() { # label dir db kind
  local t=$W/$1.$4.time
  ( cd $2 && TUNEFORGE_HOME=$W/home-$1 /usr/bin/time -f "%e %U %S" -a -o $t .venv/bin/python -m cli.main tune --backend replay "${A[@]}" --db $3 --out $W/o --json > $3.json 2>$3.err )
  python3 -c "import json; r=json.loads(open('$3.json').read().strip().splitlines()[-1]); print('$1 $4', open('$t').read().split()[-3:], r['evaluations'], r['served_from_history'], r['gpu_seconds'], r['wall_seconds'])"
}
for round in $(seq $N); do for ld in "$@"; do l=${ld%%=*}; d=${ld#*=}; rm -f $W/$l-f.db*; one $l $d $W/$l-f.db first; done; done
for round in $(seq $N); do for ld in "$@"; do l=${ld%%=*}; d=${ld#*=}; cp $W/$l-f.db $W/$l-a$round.db; one $l $d $W/$l-a$round.db again; done; done
python3 - "$W" <<'P'
import sys, glob, statistics, os
W = sys.argv[1]
for f in sorted(glob.glob(W + "/*.time")):
    rows = [l.split() for l in open(f) if l.strip() and l.split()[0][0].isdigit()]
    wall = [float(r[0]) for r in rows]; cpu = [float(r[1]) + float(r[2]) for r in rows]
    print(f"{os.path.basename(f):24} n={len(rows)} wall median {statistics.median(wall):.2f} s ({', '.join(f'{w:.2f}' for w in wall)}); cpu median {statistics.median(cpu):.2f} s")
P
