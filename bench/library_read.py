"""What reading the team's library costs: ``agent.library.entries`` (behind ``GET
/library/{family}``, ``library show`` and ``export``) and ``pick`` (behind ``GET
/library/{family}/pick``, a probe and a shape set's starting points) on a recorded database.

    python bench/library_read.py runs/2026-12-05-553da7c-softmax-sweep/r/tune.db.gz \\
        --kernel softmax --copies 1,10,40 [--repeat 9] [--json FILE]

"100 picks" is the pick at 100 shapes with the entries read once (``library export
--shapes``). ``--copies N`` reads a copy of the database whose campaigns and candidates are
there N times (new ids, the same times: a team whose history is N times as long, whose library
is the same); each copy's entries are checked equal to the first's, but for the copies' ids.
Prints the median and the fastest of ``--repeat`` reads per figure, in one process, after one
read to warm the caches; the figures are this host's, and ``--json`` writes them with the
commit.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import MetaData, Table, create_engine, select  # noqa: E402

from agent import library  # noqa: E402
from bench import git_commit  # noqa: E402
from core.db import session_scope  # noqa: E402
from core.models import Candidate  # noqa: E402


def copied(source: Path, copies: int, into: Path) -> Path:
    """``source`` (a SQLite file, gzipped or not) with every campaign and candidate ``copies``
    times: the copies' ids end in ``-k``."""
    target = into / f"x{copies}.db"
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    if copies > 1:
        engine = create_engine(f"sqlite:///{target}")
        meta = MetaData()
        campaigns = Table("campaigns", meta, autoload_with=engine)
        candidates = Table("candidates", meta, autoload_with=engine)
        with engine.begin() as conn:
            camp_rows = [dict(r._mapping) for r in conn.execute(select(campaigns))]
            cand_rows = [dict(r._mapping) for r in conn.execute(select(candidates))]
            for k in range(1, copies):
                conn.execute(campaigns.insert(), [{**r, "id": f"{r['id']}-{k}"}
                                                  for r in camp_rows])
                conn.execute(candidates.insert(), [
                    {**r, "id": f"{r['id']}-{k}", "campaign_id": f"{r['campaign_id']}-{k}"}
                    for r in cand_rows])
        engine.dispose()
    return target


def timed(repeat: int, read: Any) -> dict[str, float]:
    read()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        read()
        times.append((time.perf_counter() - start) * 1000.0)
    return {"median_ms": round(statistics.median(times), 2), "min_ms": round(min(times), 2)}


def picks(session: Any, kernel: str, found: list[library.LibraryEntry]) -> None:
    """The library's picks at 100 shapes (each measured shape scaled by 1.0 to 2.0), from one
    read (:func:`agent.library.picks`): what ``library export --shapes`` does for a program."""
    shapes = [{k: max(1, int(v * (1.0 + i / 100))) for k, v in found[i % len(found)].dims.items()}
              for i in range(100)]
    library.picks(session, team_id=None, kernel=kernel, shapes=shapes)


def without_copy_ids(entries: list[library.LibraryEntry]) -> list[dict[str, Any]]:
    out = []
    for entry in entries:
        row = entry.to_dict()
        for key in ("campaign_id", "candidate_id"):
            row[key] = row[key].split("-")[0]
        row["alternates"] = [{**a, "campaign_id": a["campaign_id"].split("-")[0],
                              "candidate_id": a["candidate_id"].split("-")[0]}
                             for a in row["alternates"]]
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path, help="a SQLite database (.db or .db.gz)")
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--copies", default="1", help="comma-separated, e.g. 1,10,40")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    first: list[dict[str, Any]] | None = None
    print("copies candidates shapes  entries  pick here  nearby  100 picks  (ms, medians)")
    with tempfile.TemporaryDirectory() as tmp:
        for copies in (int(c) for c in args.copies.split(",")):
            url = f"sqlite:///{copied(args.db, copies, Path(tmp))}"
            with session_scope(url) as s:
                found = library.entries(s, team_id=None, kernel=args.kernel)
                if not found:
                    raise SystemExit(f"{args.db}: no library of {args.kernel!r}")
                kept = without_copy_ids(found)
                if first is None:
                    first = kept
                elif kept != first:
                    raise SystemExit(f"x{copies}: the library differs from x1's")
                count = s.execute(select(Candidate.id)).all()
                measured = found[len(found) // 2].dims
                unmeasured = {k: v * 3 for k, v in measured.items()}
                reads = {
                    "entries": timed(args.repeat, lambda s=s: library.entries(
                        s, team_id=None, kernel=args.kernel)),
                    "pick_measured": timed(args.repeat, lambda s=s, d=measured: library.pick(
                        s, team_id=None, kernel=args.kernel, shape=d)),
                    "pick_unmeasured": timed(args.repeat, lambda s=s, d=unmeasured: library.pick(
                        s, team_id=None, kernel=args.kernel, shape=d)),
                    "picks_100": timed(args.repeat, lambda s=s, f=found: picks(s, args.kernel, f))}
            rows.append({"copies": copies, "candidates": len(count), "shapes": len(found),
                         "near_ties": sum(len(e.alternates) for e in found), **reads})
            medians = [reads[k]["median_ms"] for k in ("entries", "pick_measured",
                                                         "pick_unmeasured", "picks_100")]
            print(f"{copies:>6} {len(count):>10} {len(found):>6} {medians[0]:>8.1f} "
                  f"{medians[1]:>10.1f} {medians[2]:>7.1f} {medians[3]:>10.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "commit": git_commit(), "date": time.strftime("%Y-%m-%d"), "db": str(args.db),
            "kernel": args.kernel, "repeat": args.repeat,
            "host": f"{platform.machine()}, Python {platform.python_version()}",
            "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
