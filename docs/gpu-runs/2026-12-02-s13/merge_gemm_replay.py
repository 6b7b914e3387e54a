"""Add session 13 call 4's GEMM campaign rows at 4096³ to the shipped GEMM replay dataset.

    python docs/gpu-runs/2026-12-02-s13/merge_gemm_replay.py

The shipped dataset (``kernels/gemm_bias_relu/replay-h200-4096.jsonl.gz``) held the SIMT
sub-space measured on 2026-11-29, so a replayed campaign stopped at 68 % of cuBLAS and never
saw a tensor core. Call 4's two GPU campaigns from the seed's baseline at 4096³ (tolerances 1e-4
and 1e-5, ``call4.sh``) measured the path a GPU campaign takes: the SIMT moves, the mma.sync and
wgmma tf32x3 kernels, the pipeline, warp specialization, the bf16 splits and the split pass.
Their rows at 4096³ are added (a point the dataset holds keeps its row: same bytes, measured on
the same GPU model); the 8192³ warm-start rows are left out (the file is the 4096³ dataset).
The meta line gets the commit the call ran (its tree, not the device copy's stale HEAD), and
``space_domains``: the sub-space measured whole before the merge, which the tuner-efficiency
benchmarks compare strategies on (``ReplayDataset.complete_space``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench.measure_neighbourhoods import merge, read_dataset, write_dataset  # noqa: E402

SHIPPED = ROOT / "kernels/gemm_bias_relu/replay-h200-4096.jsonl.gz"
NEW = ROOT / "docs/gpu-runs/2026-12-02-s13/call4/r/replay-gemm.jsonl.gz"
#: the commit whose tree call 4 ran (``gpu-runs: session 13 call 4 script``)
CALL4_COMMIT = sys.argv[1] if len(sys.argv) > 1 else "c344a87"

base_meta, base_rows = read_dataset(SHIPPED)
if any(m.get("commit") == CALL4_COMMIT for m in base_meta.get("merged", [])):
    sys.exit("already merged")
meta, rows = read_dataset(NEW)
rows = [r for r in rows if r["shape"] == "4096x4096x4096"]
meta = {**meta, "commit": CALL4_COMMIT,
        "method": meta.get("method"),
        "note": ("session 13 call 4: two GPU campaigns from the seed's baseline at 4096³ "
                 "(tolerance 1e-4: the bf16x3 split pass, 666.9 µs; 1e-5: tf32x3, 1065.1 µs), "
                 "docs/gpu-runs/2026-12-02-s13/call4.sh")}
out_meta, merged = merge(base_meta, base_rows, meta, rows)
# the SIMT sub-space stays the one measured whole: the tuner-efficiency benchmarks use it
out_meta["space_domains"] = base_meta["domains"]
write_dataset(SHIPPED, out_meta, merged)
sys.stdout.write(f"{len(base_rows)} rows + {len(merged) - len(base_rows)} of {len(rows)} new "
                 f"-> {len(merged)}\n")
