"""The arrangements of a held row at the short-row shapes, every one with the four code moves
(max_first, ptx_stores, aligned_rows, one_pass_grid): threads a row x floats a thread x rows a
CTA, as ``bench/peer_quality.py --points`` takes them (invalid points left out).

    python runs/2026-12-04-5d16e22-softmax-moves/sweep.py > points.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels.softmax import SoftmaxParams  # noqa: E402
from kernels.softmax.params import validate  # noqa: E402

SHAPES = ((65536, 128), (32768, 512), (16384, 1024), (65536, 1024))
MOVES = {"max_first": True, "ptx_stores": True, "aligned_rows": True, "one_pass_grid": True}


def main() -> None:
    points = []
    for rows, cols in SHAPES:
        for chunks in (1, 2, 4, 8):
            row_threads = cols // (4 * chunks)
            if not 1 <= row_threads <= 1024:
                continue
            for block in (64, 128, 256, 512):
                if block < row_threads or block // row_threads > 64:
                    continue
                p = SoftmaxParams(block_threads=block, row_threads=row_threads, vec=4,
                                  passes=1, chunks=chunks, **MOVES).canonical()
                if validate(p) is not None or not (p.aligned_rows and p.one_pass_grid):
                    continue
                label = f"R{row_threads}/B{block}/k{chunks}+all"
                points.append({"kernel": "softmax", "label": label, "shape": f"{rows}x{cols}",
                               "params": asdict(p)})
    json.dump(points, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
