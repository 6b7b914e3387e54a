"""Two databases' shape-set candidates compared row for row: ids are mapped to (set, member,
iteration), so the served links and parents compare across databases.

    python rows.py BEFORE.db AFTER.db
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

COLUMNS = ("id, campaign_id, iteration, params_key, status, action, evaluation_key, "
           "source_hash, served_from, accepted, avg_us, decision, parent_id, gpu_seconds, "
           "perf, correctness, source")


def rows(db: str) -> list[tuple[Any, ...]]:
    """Every candidate with its ids replaced by where it stands."""
    c = sqlite3.connect(db)
    member = {cid: (sid, idx) for cid, sid, idx in
              c.execute("select id, set_id, set_index from campaigns")}
    sets = {sid: n for n, (sid,) in
            enumerate(c.execute("select id from shape_sets order by created_at"))}
    found = list(c.execute(f"select {COLUMNS} from candidates"))
    where = {}
    for r in found:
        sid, idx = member[r[1]]
        where[r[0]] = (sets[sid], idx, r[2])
    out = []
    for r in found:
        decision = json.loads(r[11]) if r[11] else {}
        out.append((where[r[0]], r[3], r[4], r[5], r[6], r[7], where.get(r[8]), r[9], r[10],
                    decision.get("reason"), where.get(r[12]), r[13], r[14], r[15], r[16]))
    return sorted(out, key=lambda t: t[0])


def main() -> None:
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    print(len(a), len(b), "identical" if a == b else "DIFFERENT")
    for x, y in zip(a, b, strict=False):
        if x != y:
            print(x[:12])
            print(y[:12])
            break


if __name__ == "__main__":
    main()
