"""``tuneforge tune --shapes``: a shape set, embedded (one progress line a shape, one table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.common import console, err_console, fail


def parse_shape_set(family: Any, text: str) -> list[dict[str, Any]]:
    """``--shapes``: a file, or shapes inline; each entry ``{"shape": dims, "weight": w}``.

    Inline, shapes are separated by commas (``4096x4096x4096,8192x1024x4096``), or by
    semicolons when they are written by name (``rows=8192,cols=8192;rows=16,cols=262144``); a
    weight follows a colon (``8192x8192:3``). A file holds one shape a line with an optional
    weight after a space (``#`` starts a comment), or JSON: a list of shapes, or of
    ``{"shape": ..., "weight": ...}``. Exit 2 naming the entry that is wrong."""
    path = Path(text)
    entries: list[tuple[str, Any, Any]] = []  # (where, shape text or dict, weight)
    if path.is_file():
        try:
            raw = path.read_text()
        except OSError as exc:
            fail(f"--shapes {text}: {exc}")
        if raw.lstrip().startswith("["):
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as exc:
                fail(f"--shapes {text}: not JSON: {exc}")
            for i, item in enumerate(data):
                if isinstance(item, dict) and "shape" in item:
                    entries.append((f"{text}[{i}]", item["shape"], item.get("weight", 1.0)))
                else:
                    entries.append((f"{text}[{i}]", item, 1.0))
        else:
            for n, line in enumerate(raw.splitlines(), start=1):
                words = line.split("#", 1)[0].split()
                if not words:
                    continue
                if len(words) > 2:
                    fail(f"--shapes {text}, line {n}: expected 'SHAPE [WEIGHT]', got {line!r}")
                entries.append((f"{text}, line {n}", words[0],
                                words[1] if len(words) == 2 else 1.0))
    else:
        parts = text.split(";") if "=" in text else text.split(",")
        for part in (p.strip() for p in parts):
            if not part:
                continue
            shape, _, weight = part.partition(":")
            entries.append((f"--shapes {part!r}", shape, weight or 1.0))
    if not entries:
        fail(f"--shapes {text!r}: no shape given")
    out = []
    for where, shape, weight in entries:
        try:
            dims = (family.make_dims(shape) if isinstance(shape, dict)
                    else family.parse_dims(str(shape)))
        except (ValueError, TypeError) as exc:
            fail(f"{where}: {exc}")
        try:
            w = float(weight)
        except (TypeError, ValueError):
            fail(f"{where}: the weight must be a number, got {weight!r}")
        out.append({"shape": dims.as_dict(), "weight": w})
    return out


def progress_of(family: Any, campaigns: list[Any], quiet: bool) -> tuple[Progress, Any]:
    """One progress line a member (its shape, evaluations of its share, its best so far), and
    the function that updates it after each result."""
    unit = family.metric.unit
    progress = Progress(TextColumn("[bold]{task.description:>14}[/]"), BarColumn(bar_width=16),
                        MofNCompleteColumn(), TextColumn("{task.fields[best]}"),
                        TimeElapsedColumn(), console=err_console, transient=False,
                        disable=quiet)
    tasks = {c.id: progress.add_task(c.shape_text, total=c.budget_iterations, best="",
                                     start=False) for c in campaigns}

    def on_progress(camp: Any) -> None:
        task = tasks.get(camp.id)
        if task is None:
            return
        progress.start_task(task)
        text = ""
        if camp.best_us:
            rate = family.metric.rate(camp.problem, camp.best_us) or 0.0
            x = f" · {camp.vendor_us / camp.best_us:.2f}× vendor" if camp.vendor_us else ""
            text = f"{camp.best_us:.1f} µs · {rate:.1f} {unit}{x}"
        progress.update(task, total=camp.budget_iterations, completed=camp.evaluations,
                        best=text)

    return progress, on_progress


def print_result(result: dict[str, Any]) -> None:
    """The set as one table: a row a shape."""
    table = Table(title=f"shape set {result['set_id'][:8]} · {result['kernel']} · "
                        f"{result['status']} ({result['reason']})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    # "hist.": evaluations served from the team's history (the line below says so in words)
    for col, justify in (("shape", "left"), ("w", "right"), ("evals", "right"),
                         ("best µs", "right"), (result["unit"], "right"),
                         ("× vendor", "right"), ("% peak", "right"), ("GPU s", "right"),
                         ("hist.", "right")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in result["shapes"]:
        best = row["best"] or {}
        table.add_row(row["shape"], f"{row['weight']:g}", f"{row['evaluations']}/{row['budget']}",
                      f"{best['avg_us']:.1f}" if best.get("avg_us") else "–",
                      f"{best['throughput']:.1f}" if best.get("throughput") else "–",
                      f"{row['x_vendor']:.2f}" if row.get("x_vendor") else "–",
                      f"{row['pct_of_peak']:.0f}" if row.get("pct_of_peak") else "–",
                      f"{row['gpu_seconds']:.1f}", str(row["served_from_history"]))
    console.print(table)
    console.print(f"{result['evaluations']} evaluations of a budget of {result['budget']}, "
                  f"{result['gpu_seconds']:.1f} GPU-seconds, {result['served_from_history']} "
                  "served from history", highlight=False)
