"""The short table of a ``tuneforge tune --json`` result: status, evaluations, GPU-seconds and
wall time, then a row a shape (a shape set's members, or the one campaign): its evaluations,
its best's time, its speed against the vendor where the family has one, and with ``--params``
the best's parameters.

    python bench/tune_summary.py tune.json [--params]

Exits 1 naming the file where it holds no JSON (the tune step was killed before it printed:
the campaigns' bests are still in their database).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def lines(result: dict[str, Any], params: bool = False) -> list[str]:
    """The table's lines for one ``tune --json`` result."""
    out = [f"tune: {result.get('status')} · {result.get('evaluations')} evaluations · "
           f"{result.get('gpu_seconds')} GPU-s · {result.get('wall_seconds')} s"]
    for s in result.get("shapes") or [result]:
        best = s.get("best") or {}
        row = (f"  {s.get('shape', '')!s:>16s} {s.get('evaluations')!s:>4} evals  best "
               f"{best.get('avg_us')} us")
        x_vendor = s.get("x_vendor")
        if x_vendor is None and s.get("pct_of_vendor") is not None:  # one campaign's result
            x_vendor = round(s["pct_of_vendor"] / 100, 3)
        if x_vendor is not None:
            row += f"  {x_vendor}x vendor"
        if params:
            row += f"  {json.dumps(best.get('params'), sort_keys=True)}"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="the JSON that tune --json printed")
    ap.add_argument("--params", action="store_true", help="the bests' parameters too")
    args = ap.parse_args(argv)
    try:
        result = json.loads(args.path.read_text())
    except (OSError, ValueError):
        print(f"tune: no summary in {args.path} (killed?): the campaigns' bests are still in "
              "their database", file=sys.stderr)
        return 1
    print("\n".join(lines(result, args.params)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
