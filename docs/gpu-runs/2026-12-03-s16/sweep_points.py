"""The sweep of session 16's call 2: each shape's campaign best, the newest campaign first (this
session's call files under the folder given, then its call 1, then session 14's call 5 and call
4's sweep). Prints the JSON list bench/family_quality.py --points takes."""

import json
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
s14 = here.parent / "2026-12-02-s14"
newest = [Path(sys.argv[1]), here / "call1" / "r", s14 / "call5"]
out = []
for entry in json.load(open(s14 / "call4" / "sweep.json")):
    if entry["label"].startswith("s10 7c5ee93e"):  # 65536x128: session 12's point replaced it
        continue
    for folder in newest:
        try:
            best = json.load(open(folder / f"tune-{entry['shape']}.json"))["best"]
        except (OSError, KeyError, TypeError, ValueError):
            continue
        entry = {"label": f"{folder.parent.name}/{folder.name} campaign", "shape": entry["shape"],
                 "params": best["params"]}
        break
    out.append(entry)
sys.stdout.write(json.dumps(out) + "\n")
