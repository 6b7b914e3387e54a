"""Session 17's replay dataset: the field added this session (``spread``) listed in the meta
line's domains, then the rows of this session's softmax campaigns merged in.

    d=docs/gpu-runs/2026-12-03-s17 r=kernels/softmax/replay-h200.jsonl.gz
    python $d/merge_replay_s17.py $r $r              # the domains only
    python $d/merge_replay_s17.py $r $r $d/callN/r/replay-s17.jsonl.gz ...

No field changed the bytes of an earlier point this session (a spread point is a new point;
every other point renders the source it rendered before), so at a shape the new file measured,
a point both measured keeps the new row and the other rows stay. Written gzip with mtime 0 and
no name, so the same inputs give the same bytes.
"""

import gzip
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from core.replay import domains_of  # noqa: E402
from kernels.base import params_key  # noqa: E402
from kernels.softmax import FAMILY  # noqa: E402

old_path, out_path, *new_paths = sys.argv[1:]
old = [json.loads(line) for line in gzip.open(old_path, "rt") if line.strip()]
meta = next(r for r in old if r.get("kind") == "meta")
rows = [r for r in old if r.get("kind") != "meta"]


def key(row: dict) -> tuple[str, str]:
    """What the replay reader keys a row by (core/replay.py): canonical params and shape."""
    return params_key(FAMILY.params_from_dict(row["params"]).to_dict()), row["shape"]


for new_path in new_paths:
    new = [json.loads(line) for line in gzip.open(new_path, "rt") if line.strip()]
    meta_new = next(r for r in new if r.get("kind") == "meta")
    # the call's folder names the rows (the device's copy of the tree has no commit of its own)
    tag = f"session 17 {new_path.split('/')[-3]}"
    if tag in str(meta.get("commit")):
        sys.exit(f"{old_path} already holds the rows of {tag}: run once")
    fresh = [r for r in new if r.get("kind") != "meta"]
    again = {key(r) for r in fresh}
    before = len(rows)
    rows = [r for r in rows if key(r) not in again] + fresh
    redone = sorted({r["shape"] for r in fresh})
    meta = {**meta, "device": meta_new["device"], "date": meta_new.get("date"),
            "vendor_us": {**meta["vendor_us"],
                          **{k: v for k, v in meta_new["vendor_us"].items() if k in redone}},
            "commit": f"{meta.get('commit')}; {tag} (at {', '.join(redone)})",
            "campaigns": meta["campaigns"] + meta_new["campaigns"],
            "note": (f"{meta.get('note', '')}; {tag} ({new_path}, main at b2fe664 with "
                     "session 17's changes: spread points) measured "
                     f"{', '.join(redone)}: {len(fresh)} rows added, "
                     f"{before + len(fresh) - len(rows)} of the earlier rows measured again "
                     "replaced; vendor_us there the new torch times")}
assert len({key(r) for r in rows}) == len(rows)
new_fields: dict[str, list[Any]] = {"spread": [False]}
meta = {**meta, "domains": domains_of(FAMILY, rows, new_fields),
        "shapes": sorted({r["shape"] for r in rows}), "measured": len(rows)}
text = "".join(json.dumps(r) + "\n" for r in [meta, *rows])
with open(out_path, "wb") as fh:
    fh.write(gzip.compress(text.encode(), mtime=0))
