"""The decision chains of embedded replay campaigns, recorded or checked against a record.

    python bench/replay_decisions.py record tests/data/replay-decisions.json
    python bench/replay_decisions.py check tests/data/replay-decisions.json [--cases a,b]

Each case runs ``tuneforge tune --backend replay`` in a child process (as a user runs it) on a
fresh SQLite file, then reads back every candidate in iteration order: its action, point,
status, decision and parent. A change to how campaigns are driven must leave every chain as it
was, seed for seed; ``check`` prints the first difference of each case that moved and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]

#: (name, arguments of ``tuneforge tune``): every policy, both built-in families, several
#: seeds, a warm start from an earlier campaign of the same database
CASES: list[tuple[str, list[str]]] = [
    ("gemm-expert-s0", ["--budget", "120", "--seed", "0"]),
    ("gemm-expert-s1", ["--budget", "80", "--seed", "1"]),
    ("gemm-expert-s2-tol1e-5", ["--budget", "80", "--seed", "2", "--tolerance", "1e-5"]),
    ("gemm-random-s3", ["--budget", "50", "--seed", "3", "--policy", "random"]),
    ("gemm-optuna-s0", ["--budget", "40", "--seed", "0", "--policy", "optuna"]),
    ("gemm-expert-warm", ["--budget", "30", "--seed", "4", "--start-from", "best"]),
    ("softmax-expert-s0", ["--kernel", "softmax", "--budget", "80", "--seed", "0"]),
    ("softmax-expert-65536x128", ["--kernel", "softmax", "--budget", "60", "--seed", "1",
                                  "--shape", "65536x128"]),
    ("softmax-random-s2", ["--kernel", "softmax", "--budget", "40", "--seed", "2",
                           "--policy", "random"]),
]


def tune(home: Path, db: Path, args: list[str]) -> dict[str, Any]:
    """One embedded replay campaign; its JSON summary."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, "tune", "--backend", "replay", "--db", str(db),
                           "--out", str(home / "out"), "--json", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"tuneforge tune {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def chain(db: Path, campaign_id: str) -> list[list[Any]]:
    """Iteration, action, point key, status, accepted, decision reason, parent iteration."""
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT id, iteration, action, params_key, status, accepted, decision, parent_id "
            "FROM candidates WHERE campaign_id = :id ORDER BY iteration"),
            {"id": campaign_id}).all()
    engine.dispose()
    iteration_of = {r.id: r.iteration for r in rows}
    out = []
    for r in rows:
        decision = json.loads(r.decision) if isinstance(r.decision, str) else r.decision
        out.append([r.iteration, r.action, r.params_key, r.status, bool(r.accepted),
                    (decision or {}).get("reason"), iteration_of.get(r.parent_id)])
    return out


def run_all(names: list[str] | None = None) -> dict[str, Any]:
    """The summary figures and decision chain of every case (of ``names``, when given)."""
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for name, args in CASES:
            if names is not None and name not in names:
                continue
            db = home / ("warm.db" if "warm" in name else f"{name}.db")
            if "warm" in name:  # the earlier campaign the warm start reads
                tune(home, db, ["--budget", "40", "--seed", "0"])
            result = tune(home, db, args)
            found[name] = {"args": args, "status": result["status"],
                           "evaluations": result["evaluations"],
                           "best_us": (result.get("best") or {}).get("avg_us"),
                           "chain": chain(db, result["campaign_id"])}
            print(f"{name:28s} {result['evaluations']:4d} evaluations, best "
                  f"{found[name]['best_us']} µs")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["record", "check"])
    parser.add_argument("path", type=Path)
    parser.add_argument("--cases", help="comma-separated case names (default: every case)")
    args = parser.parse_args(argv)
    names = args.cases.split(",") if args.cases else None
    found = run_all(names)
    if args.mode == "record":
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(json.dumps(found, indent=1) + "\n")
        return 0
    recorded = {name: case for name, case in json.loads(args.path.read_text()).items()
                if names is None or name in names}
    moved = 0
    for name, case in recorded.items():
        now = found.get(name)
        if now is None:
            print(f"{name}: not run")
            moved += 1
            continue
        if now["chain"] == case["chain"]:
            continue
        moved += 1
        first = next((i for i, (a, b) in enumerate(zip(case["chain"], now["chain"],
                                                        strict=False)) if a != b),
                     min(len(case["chain"]), len(now["chain"])))
        print(f"{name}: differs at iteration {first}:\n  was {case['chain'][first:first + 1]}"
              f"\n  now {now['chain'][first:first + 1]} ({len(case['chain'])} -> "
              f"{len(now['chain'])} candidates)")
    print(f"{len(recorded) - moved} of {len(recorded)} chains unchanged")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
