"""Merge a GPU session's campaign rows into a family's shipped replay dataset.

    python bench/merge_replay.py --kernel softmax --dataset kernels/softmax/replay-h200.jsonl.gz \
        --tag "CALL" --note "the tree that measured them" CALL/replay.jsonl.gz [...]

The new files are what ``bench/replay_from_campaigns.py`` writes on the GPU machine. Rows are
keyed as the replay reader keys them (canonical params, shape): a point a new file measured
again keeps the new row, every other row stays, so a new field whose default renders the same
bytes keeps the old rows valid. The meta line takes the device and date of the new file, torch's
times at the shapes it measured, the tag and note appended to its commit and note, its campaigns
(counted),
and the domains of every row (:func:`core.replay.domains_of`: a field's default listed even where
JSON leaves it out). A tag already in the meta's commit is refused: run once. Written gzip with
mtime 0 and no name, so the same inputs give the same bytes. Prints one line a file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.replay import domains_of  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import params_key  # noqa: E402


def read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The meta line and the rows of a replay file."""
    lines = [json.loads(line) for line in gzip.open(path, "rt") if line.strip()]
    metas = [r for r in lines if r.get("kind") == "meta"]
    if len(metas) != 1:
        raise SystemExit(f"{path}: {len(metas)} meta lines, not one")
    return metas[0], [r for r in lines if r.get("kind") != "meta"]


def merge(family: Any, meta: dict[str, Any], rows: list[dict[str, Any]],
          new_meta: dict[str, Any], fresh: list[dict[str, Any]], tag: str, source: str
          ) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """``rows`` with ``fresh`` merged in and the meta to go with them, and how many earlier
    rows the new ones replaced; ``source`` says in the note where they came from."""
    def key(row: dict[str, Any]) -> tuple[str, str]:
        return params_key(family.params_from_dict(row["params"]).to_dict()), row["shape"]

    if tag in str(meta.get("commit")):
        raise SystemExit(f"the dataset already holds the rows of {tag!r}: run once")
    again = {key(r) for r in fresh}
    kept = [r for r in rows if key(r) not in again]
    replaced = len(rows) - len(kept)
    merged = kept + fresh
    if len({key(r) for r in merged}) != len(merged):
        raise SystemExit(f"{tag}: the new rows measure one point twice")
    redone = sorted({r["shape"] for r in fresh})
    meta = {**meta, "device": new_meta.get("device", meta.get("device")),
            "date": new_meta.get("date", meta.get("date")),
            "vendor_us": {**meta.get("vendor_us", {}),
                          **{k: v for k, v in new_meta.get("vendor_us", {}).items()
                             if k in redone}},
            "commit": f"{meta.get('commit')}; {tag} (at {', '.join(redone)})",
            "campaigns": meta.get("campaigns", 0) + new_meta.get("campaigns", 0),
            "note": (f"{meta.get('note', '')}; {tag} ({source}) measured {', '.join(redone)}: "
                     f"{len(fresh)} rows added, {replaced} of the earlier rows measured again "
                     "replaced; vendor_us there the new torch times"),
            "domains": domains_of(family, merged),
            "shapes": sorted({r["shape"] for r in merged}), "measured": len(merged)}
    return meta, merged, replaced


def main() -> int:
    """Merge each new file in turn; write the dataset."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True, help="the family (softmax, gemm_bias_relu, ...)")
    ap.add_argument("--dataset", type=Path, required=True, help="the shipped replay dataset")
    ap.add_argument("--out", type=Path, default=None, help="where to write (the dataset)")
    ap.add_argument("--tag", required=True,
                    help="names the new rows in the meta (a file's folder is added when several)")
    ap.add_argument("--note", default="", help="what the tree that measured them had")
    ap.add_argument("new", type=Path, nargs="*", help="replay files of the session's campaigns")
    args = ap.parse_args()
    family = get_family(args.kernel)
    meta, rows = read(args.dataset)
    for path in args.new:
        new_meta, fresh = read(path)
        tag = args.tag if len(args.new) == 1 else f"{args.tag} {path.parent.parent.name}"
        source = f"{path}, {args.note}" if args.note else str(path)
        meta, rows, replaced = merge(family, meta, rows, new_meta, fresh, tag, source)
        print(f"{path}: {len(fresh)} rows, {replaced} earlier rows replaced; {len(rows)} in all")
    if not args.new:  # the domains only (a field added to the family)
        meta = {**meta, "domains": domains_of(family, rows)}
    text = "".join(json.dumps(r) + "\n" for r in [meta, *rows])
    with open(args.out or args.dataset, "wb") as fh:
        fh.write(gzip.compress(text.encode(), mtime=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
