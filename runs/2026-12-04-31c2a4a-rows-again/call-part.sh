# (sourced by a call script, with $r the output folder) a 2-shape GEMM set of 60 on the GPU,
# then the same set again under every thread's cProfile: where a served evaluation's time goes
mkdir -p $r/again; rec=runs/2026-12-04-31c2a4a-rows-again
S=2048x2048x2048,1024x1024x1024
timeout -s KILL 90 python3 -m cli.main tune --backend gpu --kernel gemm_bias_relu --shapes $S \
  --budget 60 --db /tmp/again.db --out /tmp/again-o --json 2>/dev/null | tail -1 > $r/again/set-1.json
t0=$(date +%s.%N)
timeout -s KILL 60 python3 -m cli.main tune --backend gpu --kernel gemm_bias_relu --shapes $S \
  --budget 60 --db /tmp/again.db --out /tmp/again-o --json 2>/dev/null | tail -1 > $r/again/set-2.json
t1=$(date +%s.%N)
PROFILE_OUT=$r/again/again.prof timeout -s KILL 90 python3 $rec/threadprof.py tune --backend gpu \
  --kernel gemm_bias_relu --shapes $S --budget 60 --db /tmp/again.db --out /tmp/again-o --json \
  2>/dev/null | tail -1 > $r/again/set-3.json
python3 -c "
import json, pstats
a, b = (json.load(open('$r/again/set-%d.json' % i)) for i in (1, 2))
print('again: first %s evals %.2f GPU-s; again %s evals %s served %.2f GPU-s in %.1f s wall' % (
    a['evaluations'], a['gpu_seconds'], b['evaluations'], b['served_from_history'],
    b['gpu_seconds'], $t1 - $t0))
p = pstats.Stats('$r/again/again.prof'); p.sort_stats('cumulative')
p.print_stats(r'/(agent|core|worker|kernels|cli)/', 30)" 2>&1 | grep -v '^$' | cut -c1-160 | tee -a $log | head -45
