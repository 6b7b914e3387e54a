"""A py-spy raw profile (``py-spy record -f raw``) as a tree under the first frame that
starts with ROOT: samples and share of all samples, DEPTH levels, nodes above MIN_PCT.

    python tree.py PROFILE.raw ROOT [DEPTH] [MIN_PCT]
"""

from __future__ import annotations

import re
import sys
from typing import Any


def node() -> list[Any]:
    return [0, {}]


def main() -> None:
    path, root = sys.argv[1], sys.argv[2]
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    min_pct = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    total = 0
    top = node()
    for line in open(path):
        stack, count = line.rstrip().rsplit(" ", 1)
        n = int(count)
        total += n
        frames = [re.sub(r" \(.*?([^/]*/[^/]*\.py|<[^>]*>)(:\d+)?\)", r" (\1)", f)
                  for f in stack.split(";")]
        at = next((i for i, f in enumerate(frames) if f.startswith(root)), None)
        if at is None:
            continue
        cur = top
        cur[0] += n
        for f in frames[at + 1: at + 1 + depth]:
            cur = cur[1].setdefault(f, node())
            cur[0] += n

    def show(n: list[Any], indent: int) -> None:
        for name, child in sorted(n[1].items(), key=lambda kv: -kv[1][0]):
            if 100 * child[0] / total >= min_pct:
                print(f"{'  ' * indent}{child[0]:5d} {100 * child[0] / total:5.1f}% {name[:110]}")
                show(child, indent + 1)

    print(f"total {total}, under {root}: {top[0]}")
    show(top, 0)


if __name__ == "__main__":
    main()
