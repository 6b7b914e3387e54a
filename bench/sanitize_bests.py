"""compute-sanitizer on the fastest point of each shape of a family's replay dataset.

    python bench/sanitize_bests.py --kernel softmax [--tools memcheck,racecheck] --out DIR

For each shape of the family's shipped replay dataset (measured on a GPU), the fastest correct
point is compiled and run under every tool at the family's sanitizer shapes and at the dataset's
shape (memcheck), through the same launch contract as the evaluation child. Prints one line per
point and writes ``sanitize.json`` under ``--out``.
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
    args = ap.parse_args()
    family = get_family(args.kernel)
    dataset = ReplayDataset(family.replay_datasets()[0], family)
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    device = probe_gpu("0")
    records = []
    flagged = 0
    for shape_text in dataset.shapes():
        dims = family.parse_dims(shape_text)
        best = dataset.best(dims)
        if best is None:
            continue
        params = family.params_from_dict(best["params"])
        compiled = compiler.compile(family.render(params), entry=family.name,
                                    dynamic_smem_bytes=family.dynamic_smem_bytes(params),
                                    arch=target_arch(family, params, compiler.arch))
        record = check(family, params, compiled.cubin(), tools=parse_tools(args.tools),
                       campaign_shape=dims, device=device)
        flagged += record["status"] != "passed"
        records.append({"shape": shape_text, "params": best["params"], "record": record})
        print(f"{shape_text:14s} {record['status']:8s} {summary_line(record)}")
    compiler.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sanitize.json").write_text(json.dumps(records, indent=1, default=str))
    print(f"{len(records) - flagged} of {len(records)} points passed every tool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
