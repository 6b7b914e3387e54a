"""Merge session 14's softmax campaigns into the shipped replay dataset (run once per input:
call 3's file, then call 4's, then call 5's, onto the dataset of 0b1bd65). At each shape the
new file measured, the dataset drops the ``push`` rows of earlier sessions (their kernels render
other bytes since c76fa3f: the relaxed first cluster arrival) and the points the new file
measured again, keeps the rest, and adds the new rows; the other shapes keep their rows (no
push point was measured there). Written gzip with mtime 0 and no name, so the same inputs give
the same bytes.

    d=docs/gpu-runs/2026-12-02-s14 r=kernels/softmax/replay-h200.jsonl.gz
    for f in call3/replay-s14.jsonl.gz call4/replay-s14b.jsonl.gz call5/replay-s14c.jsonl.gz; do
      python $d/merge_replay_s14.py $r $d/$f $r
    done
"""

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from core.replay import domains_of  # noqa: E402
from kernels.base import params_key  # noqa: E402
from kernels.softmax import FAMILY  # noqa: E402

old_path, new_path, out_path = sys.argv[1:4]
old = [json.loads(line) for line in gzip.open(old_path, "rt") if line.strip()]
new = [json.loads(line) for line in gzip.open(new_path, "rt") if line.strip()]
meta_old = next(r for r in old if r.get("kind") == "meta")
meta_new = next(r for r in new if r.get("kind") == "meta")
tag = f"{meta_new['commit']}@{new_path.split('/')[-2]}"
if tag in str(meta_old.get("commit")):
    sys.exit(f"{old_path} already holds the rows of {tag}: run once")


def key(row: dict) -> tuple[str, str]:
    """What the replay reader keys a row by (core/replay.py): canonical params and shape."""
    return params_key(FAMILY.params_from_dict(row["params"]).to_dict()), row["shape"]


#: campaigns of session 14's files: their push rows have the bytes of c76fa3f
current = {r.get("campaign_id") for f in Path(__file__).parent.glob("call*/replay-*.jsonl.gz")
           for r in map(json.loads, gzip.open(f, "rt")) if r.get("kind") != "meta"}
old_rows = [r for r in old if r.get("kind") != "meta"]
fresh = [r for r in new if r.get("kind") != "meta"]
redone = list(dict.fromkeys(r["shape"] for r in fresh))
assert sorted(redone) == sorted(meta_new["shapes"]), (redone, meta_new["shapes"])
measured_again = {key(r) for r in fresh}
assert all(r["campaign_id"] in current for r in old_rows
           if r["params"].get("push") and r["shape"] not in redone)
untouched = [r for r in old_rows if r["shape"] not in redone]
rows, counts = list(untouched), {}
for shape in redone:
    here = [r for r in old_rows if r["shape"] == shape]
    kept = [r for r in here if key(r) not in measured_again
            and (not r["params"].get("push") or r["campaign_id"] in current)]
    added = [r for r in fresh if r["shape"] == shape]
    rows += kept + added
    counts[shape] = (len(here), len(kept), len(added))
assert len({key(r) for r in rows}) == len(rows)

domains = domains_of(FAMILY, rows)  # every field's values, key-omitted defaults too
left = {r["campaign_id"] for r in rows}
gone = {r["campaign_id"] for r in old_rows} - left
where = ", ".join(f"{s} {k} kept of {b} + {a} new" for s, (b, k, a) in sorted(counts.items()))
meta = {**meta_old, "device": meta_new["device"], "date": meta_new.get("date"),
        "domains": domains,
        "vendor_us": {**meta_old["vendor_us"],
                      **{k: v for k, v in meta_new["vendor_us"].items() if k in redone}},
        "shapes": sorted({r["shape"] for r in rows}),
        "commit": f"{meta_old.get('commit')}; {tag} (session 14 at {', '.join(sorted(redone))})",
        "campaigns": meta_old["campaigns"] - len(gone) + meta_new["campaigns"],
        "measured": len(rows),
        "note": (f"{meta_old.get('note', '')}; session 14 ({new_path}, tree "
                 f"{meta_new['commit']}: the push kernels' first cluster arrival relaxed) "
                 f"measured {', '.join(sorted(redone))} again: the push rows there dropped "
                 f"(other bytes), its rows added, a point both measured keeping the new row "
                 f"({where}); vendor_us there the new torch times")}
text = "".join(json.dumps(r) + "\n" for r in [meta, *rows])
with open(out_path, "wb") as fh:
    fh.write(gzip.compress(text.encode(), mtime=0))
sys.stdout.write(f"{len(rows)} rows ({where})\n")
