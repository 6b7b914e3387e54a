#!/usr/bin/env bash
# Session 14, call 6 (<= 60 s): the device-to-device copy rate at the bytes of each long-row
# shape (read + write of rows x cols floats), L2 flushed before each copy, CUDA events, median
# of 30, beside the 1 GB copy the evaluation child measures: what "90 % of copy" asks of a
# problem of 16 MB.
timeout -s KILL 50 python3 - <<'PY' 2>&1 | tee $OUT/log.txt
import torch
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for rows, cols in ((16, 262144), (256, 262144), (1024, 131072), (8192, 8192), (16384, 16384)):
    n = rows * cols
    a = torch.randn(n, device="cuda"); b = torch.empty_like(a)
    ts = []
    for i in range(33):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); b.copy_(a); e.record(); e.synchronize()
        if i >= 3:
            ts.append(s.elapsed_time(e) * 1e3)
    ts.sort(); us = ts[len(ts) // 2]
    print(f"{rows}x{cols}: {8 * n / 2**20:.0f} MB moved, copy {us:.1f} us = {8 * n / us / 1e3:.0f} GB/s")
PY
