"""compute-sanitizer on the fastest point of each shape of a family's replay dataset.

    python bench/sanitize_bests.py --kernel softmax [--tools memcheck,racecheck] --out DIR
    python bench/sanitize_bests.py --kernel gemm_bias_relu --params '{...}' --shape 4096x4096x4096 \
        --out DIR

For each shape of the family's shipped replay dataset (measured on a GPU), the fastest correct
point is compiled and run under every tool at the family's sanitizer shapes and at the dataset's
shape (memcheck), through the same launch contract as the evaluation child. Prints one line per
point and writes ``sanitize.json`` under ``--out``. With ``--params`` (repeatable) the points
given are checked instead, at ``--shape`` (the family's default shape if none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.replay import ReplayDataset  # noqa: E402
from kernels import get_family  # noqa: E402
from worker.compile import Compiler, target_arch  # noqa: E402
from worker.sanitize import check, parse_tools, probe_gpu, summary_line  # noqa: E402


def main() -> int:
    """Check every shape's best point, print and write the records."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--tools", default="memcheck,racecheck")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--params", action="append", default=[],
                    help="a point's JSON to check instead of the dataset's bests (repeatable)")
    ap.add_argument("--shape", default=None, help="the campaign shape of the --params points")
    args = ap.parse_args()
    family = get_family(args.kernel)
    if args.params:
        shape_text = args.shape or str(family.default_dims)
        todo = [(shape_text, json.loads(text)) for text in args.params]
    else:
        dataset = ReplayDataset(family.replay_datasets()[0], family)
        todo = []
        for shape_text in dataset.shapes():
            best = dataset.best(family.parse_dims(shape_text))
            if best is not None:
                todo.append((shape_text, best["params"]))
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    device = probe_gpu("0")
    records = []
    flagged = 0
    for shape_text, point in todo:
        dims = family.parse_dims(shape_text)
        params = family.params_from_dict(point)
        compiled = compiler.compile(family.render(params), entry=family.name,
                                    dynamic_smem_bytes=family.dynamic_smem_bytes(params),
                                    arch=target_arch(family, params, compiler.arch))
        record = check(family, params, compiled.cubin(), tools=parse_tools(args.tools),
                       campaign_shape=dims, device=device)
        flagged += record["status"] != "passed"
        records.append({"shape": shape_text, "params": point, "record": record})
        print(f"{shape_text:14s} {record['status']:8s} {summary_line(record)}")
    compiler.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sanitize.json").write_text(json.dumps(records, indent=1, default=str))
    print(f"{len(records) - flagged} of {len(records)} points passed every tool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
