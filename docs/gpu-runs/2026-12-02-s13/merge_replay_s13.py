"""Merge session 13's call-1 campaigns into the shipped softmax replay dataset (run once): at each
shape call 1 measured (2048x65536, 1024x131072, 256x262144, 16x262144, with the new ``push``
points) the dataset keeps its rows (session 12 call 3, tree 04c0286) and adds call 1's (tree
935e342); a point both measured at a shape keeps call 1's row. The other shapes keep their rows.
Session 12's rows stay valid at 935e342: ``push`` is left out of a point's key while false, and
every non-push point renders the same CUDA source and launch at both trees.

Rows keep the order they had (the untouched shapes first, as the file held them); each
re-measured shape then follows, session 12's remaining rows before call 1's. Written gzip
with mtime 0, so the same inputs give the same bytes.

    python docs/gpu-runs/2026-12-02-s13/merge_replay_s13.py \\
        kernels/softmax/replay-h200.jsonl.gz \\
        docs/gpu-runs/2026-12-02-s13/call1/r/replay-next.jsonl.gz \\
        kernels/softmax/replay-h200.jsonl.gz
"""

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from kernels.base import params_key  # noqa: E402
from kernels.softmax import FAMILY  # noqa: E402

old_path, new_path, out_path = sys.argv[1:4]
old = [json.loads(line) for line in gzip.open(old_path, "rt") if line.strip()]
new = [json.loads(line) for line in gzip.open(new_path, "rt") if line.strip()]
meta_old = next(r for r in old if r.get("kind") == "meta")
meta_new = next(r for r in new if r.get("kind") == "meta")
if meta_new["commit"] in str(meta_old.get("commit")):
    sys.exit(f"{old_path} already holds the rows of {meta_new['commit']}: run once")


def key(row: dict) -> tuple[str, str]:
    """What the replay reader keys a row by (core/replay.py): canonical params and shape."""
    return params_key(FAMILY.params_from_dict(row["params"]).to_dict()), row["shape"]


old_rows = [r for r in old if r.get("kind") != "meta"]
fresh = [r for r in new if r.get("kind") != "meta"]
redone = list(dict.fromkeys(r["shape"] for r in fresh))  # call 1's order
assert sorted(redone) == sorted(meta_new["shapes"]), (redone, meta_new["shapes"])
measured_again = {key(r) for r in fresh}
untouched = [r for r in old_rows if r["shape"] not in redone]
rows, counts = list(untouched), {}
for shape in redone:
    kept = [r for r in old_rows if r["shape"] == shape and key(r) not in measured_again]
    added = [r for r in fresh if r["shape"] == shape]
    rows += kept + added
    before = sum(1 for r in old_rows if r["shape"] == shape)
    counts[shape] = (before, len(kept), before - len(kept), len(added), len(kept) + len(added))
assert len({key(r) for r in rows}) == len(rows)

# the values each parameter takes in the rows, as bench/replay_from_campaigns.py lists them
domains: dict = {}
for r in rows:
    for name, value in r["params"].items():
        if value not in domains.setdefault(name, []):
            domains[name].append(value)
left = {r["campaign_id"] for r in rows}
gone = {r["campaign_id"] for r in old_rows} - left
where = ", ".join(f"{s} {k} kept + {a} new" for s, (_b, k, _r, a, _n) in sorted(counts.items()))
meta = {**meta_old, "device": meta_new["device"], "date": meta_new.get("date"),
        "domains": {k: sorted(v, key=str) for k, v in domains.items()},
        "vendor_us": {**meta_old["vendor_us"],
                      **{k: v for k, v in meta_new["vendor_us"].items() if k in redone}},
        "shapes": sorted({r["shape"] for r in rows}),
        "commit": (f"{meta_old.get('commit')}, {meta_new['commit']} (session 13 call 1 at "
                   f"{', '.join(sorted(redone))}, beside call 3's rows there)"),
        "campaigns": meta_old["campaigns"] - len(gone) + meta_new["campaigns"],
        "measured": len(rows),
        "note": (f"{meta_old.get('note', '')}; session 13 call 1 (docs/gpu-runs/2026-12-02-s13/"
                 f"call1.sh, tree {meta_new['commit']}: the cluster push offered) measured "
                 f"{', '.join(sorted(redone))} again: its rows added to call 3's, a point both "
                 f"measured keeping call 1's row ({where}); vendor_us there call 1's torch "
                 "times (the vendor timed after the child's poison and flush), call 3's rows "
                 "keeping the torch time they were measured beside")}
text = "".join(json.dumps(r) + "\n" for r in [meta, *rows])
with open(out_path, "wb") as f:
    f.write(gzip.compress(text.encode(), mtime=0))
for shape, (n_before, n_kept, n_again, n_added, n_after) in sorted(counts.items()):
    sys.stdout.write(f"{shape:12s} {n_before:3d} rows -> {n_after:3d}: {n_kept} kept, {n_again} "
                     f"measured again, {n_added} from call 1\n")
sys.stdout.write(f"untouched {len(untouched)}; {len(old_rows)} rows -> {meta['measured']}\n")
