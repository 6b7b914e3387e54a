"""The SM clock and the board power while each kernel of a peer run is timed.

    python bench/sustained_clock.py --points bench/sustained_clock_points.json \\
        --shapes 4096x4096x4096,8192x8192x8192 --min-ms 2000 --out out/

Runs :mod:`bench.peer_quality` (``--family gemm_bias_relu --no-replay``, the points at the
given shapes, all by default, written to ``points.json``; sustained runs of ``--min-ms``) while
``nvidia-smi`` samples the GPU every 20 ms: SM clock, power draw and limit, temperature and the
active clock-event reasons. Every progress line
of the run (``peers: …`` or ``ours: …``, each ending in the seconds it took) is stamped as it
arrives, which gives each timing its window; the samples in the window's last 80 % (the
sustained run, past the checks and the flushed launches) give its median SM clock and power and
the share of samples the power cap held the clock down (reason bit 0x4). Prints one row a
timing; writes ``clock.json``, the samples (``smi.csv``) and the stamped progress under
``--out``, beside peer_quality's own output (``q/``).

What it answers: whether the ratio of two kernels' sustained rates differs from their flushed
one because the GPU holds a lower clock for one of them at its power limit.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: the nvidia-smi fields, in the order of a sample line
FIELDS = ("timestamp", "clocks.sm", "power.draw", "power.limit", "temperature.gpu",
          "clocks_event_reasons.active")
#: the older driver's name of the reasons field, asked for when the newer is refused
OLD_REASONS = "clocks_throttle_reasons.active"
#: clocks_event_reasons bit: the software power cap holds the clock down
SW_POWER_CAP = 0x4
#: a progress line of peer_quality: who, shape, label, and the seconds it took
LINE = re.compile(r"^(peers|ours): (?:gemm_bias_relu )?(\S+) (.+?): .*\((\d+(?:\.\d+)?) s\)\s*$")
#: the share of a window at its start left out (checks and flushed launches)
SKIP = 0.2


def parse_samples(lines: list[str]) -> list[dict[str, float]]:
    """nvidia-smi's CSV lines (no header, no units) as dicts; lines that do not parse are
    skipped (the sampler's last line may be cut)."""
    out = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(FIELDS):
            continue
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append({"t": t, "sm_mhz": float(parts[1]), "power_w": float(parts[2]),
                        "limit_w": float(parts[3]), "temp_c": float(parts[4]),
                        "reasons": float(int(parts[5], 16))})
        except ValueError:
            continue
    return out


def windows(stamped: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """Each progress line's timing window ``[end - seconds, end]``, with who, shape, label."""
    out = []
    for end, line in stamped:
        m = LINE.match(line)
        if m:
            seconds = float(m.group(4))
            out.append({"who": m.group(1), "shape": m.group(2), "label": m.group(3),
                        "start": end - seconds, "end": end, "seconds": seconds})
    return out


def summarize(window: dict[str, Any], samples: list[dict[str, float]]) -> dict[str, Any]:
    """Median SM clock and power, the hottest temperature and the share of power-capped
    samples in the window's last ``1 - SKIP``."""
    start = window["start"] + SKIP * (window["end"] - window["start"])
    inside = [s for s in samples if start <= s["t"] <= window["end"]]
    row = {k: window[k] for k in ("who", "shape", "label", "seconds")}
    row["samples"] = len(inside)
    if inside:
        row.update(
            sm_mhz=statistics.median(s["sm_mhz"] for s in inside),
            power_w=statistics.median(s["power_w"] for s in inside),
            limit_w=inside[-1]["limit_w"],
            temp_c=max(s["temp_c"] for s in inside),
            power_capped=sum(1 for s in inside if int(s["reasons"]) & SW_POWER_CAP)
            / len(inside))
    return row


def query_fields() -> tuple[str, ...]:
    """FIELDS, or FIELDS with the older reasons name where this driver refuses the newer."""
    for fields in (FIELDS, FIELDS[:-1] + (OLD_REASONS,)):
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                                "--format=csv,noheader,nounits"], capture_output=True)
        if probe.returncode == 0:
            return fields
    return FIELDS


def main(argv: list[str] | None = None) -> int:
    """Sample, run, join, print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=Path, required=True)
    ap.add_argument("--shapes", default="", help="comma-separated shapes of the points to "
                    "keep (default all)")
    ap.add_argument("--min-ms", type=float, default=2000.0)
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    keep = {s for s in args.shapes.split(",") if s}
    points_path = args.out / "points.json"
    points_path.write_text(json.dumps(
        [p for p in json.loads(args.points.read_text()) if not keep or p["shape"] in keep],
        indent=1))
    smi_path = args.out / "smi.csv"
    with smi_path.open("w") as smi_out:
        sampler = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={','.join(query_fields())}",
             "--format=csv,noheader,nounits", "-lms", "20"], stdout=smi_out)
        try:
            run = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "peer_quality.py"), "--family",
                 "gemm_bias_relu", "--no-replay", "--points", str(points_path),
                 "--min-ms", str(args.min_ms), "--budget-s", str(args.budget_s),
                 "--out", str(args.out / "q")],
                stdout=(args.out / "quality.txt").open("w"), stderr=subprocess.PIPE, text=True)
            assert run.stderr is not None
            stamped = [(time.time(), line.rstrip("\n")) for line in run.stderr]
            rc = run.wait()
        finally:
            sampler.terminate()
            sampler.wait()
    (args.out / "progress.txt").write_text(
        "".join(f"{t:.3f} {line}\n" for t, line in stamped))
    samples = parse_samples(smi_path.read_text().splitlines())
    rows = [summarize(w, samples) for w in windows(stamped)]
    (args.out / "clock.json").write_text(json.dumps({"rc": rc, "rows": rows}, indent=1))
    print(f"peer_quality rc {rc}; {len(samples)} samples; the windows' last "
          f"{1 - SKIP:.0%}, medians")
    print(f"{'shape':>15} {'timing':<28} {'s':>5} {'MHz':>5} {'W':>5} {'capped':>6} {'°C':>3}")
    for r in rows:
        if "sm_mhz" not in r:
            print(f"{r['shape']:>15} {r['who'] + ' ' + r['label']:<28.28} {r['seconds']:5.2f}"
                  "  no samples")
            continue
        print(f"{r['shape']:>15} {r['who'] + ' ' + r['label']:<28.28} {r['seconds']:5.2f} "
              f"{r['sm_mhz']:5.0f} {r['power_w']:5.0f} {r['power_capped']:6.0%} "
              f"{r['temp_c']:3.0f}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
