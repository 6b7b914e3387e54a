"""What ``tuneforge tune`` shows while a campaign runs: one progress line that stays whole in
the terminal's width (80 columns included), and the banner of a replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from cli.common import err_console

#: The narrowest bar drawn; the rest of the line is never cut for it.
MIN_BAR = 4
#: The widest bar drawn (rich's default).
MAX_BAR = 40


def best_text(family: Any, problem: Any, best_us: float | None,
              vendor_us: float | None) -> str:
    """``best 669.7 µs · 205.2 TFLOP/s · 4.07× cuBLAS fp32``: the best so far, its rate in the
    family's unit and its speed against the vendor (empty before a correct kernel)."""
    from agent.exports import vendor_speed

    if not best_us:
        return ""
    rate = family.metric.rate(problem, best_us) or 0.0
    text = f"best {best_us:.1f} µs · {rate:.1f} {family.metric.unit}"
    if vendor_us and family.vendor is not None:
        text += f" · {vendor_speed(100 * vendor_us / best_us, family.vendor.name)}"
    return text


def campaign_progress(family: Any, problem: Any, total: int, quiet: bool
                      ) -> tuple[Progress, Callable[[Any], None]]:
    """The progress line of one campaign (``tuning ━━ 138/600 best … 0:00:09``) and the function
    that updates it after each result. The bar takes what the count, the best and the clock
    leave of the terminal's width, down to :data:`MIN_BAR`: they are never cut."""
    width = len(f"{total}/{total}")
    bar = BarColumn(bar_width=MAX_BAR)
    progress = Progress(
        TextColumn("[bold]tuning[/]"), bar,
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=width)),
        TextColumn("{task.fields[best]}", table_column=Column(no_wrap=True)),
        TimeElapsedColumn(), console=err_console, transient=False, disable=quiet)
    task = progress.add_task("tune", total=total, best="")

    def fit(text: str) -> None:
        # "tuning" + the count + the text + "0:00:00", a space between each
        taken = len("tuning") + width + len(text) + len("0:00:00") + 4
        bar.bar_width = max(MIN_BAR, min(MAX_BAR, err_console.width - taken - 1))

    fit("")

    def on_progress(camp: Any) -> None:
        text = best_text(family, problem, camp.best_us, camp.vendor_us)
        fit(text)
        progress.update(task, completed=camp.evaluations, best=text)

    return progress, on_progress


def why_no_gpu(reason: str | None) -> str:
    """Why the local GPU is not used, in a user's words (a missing pycuda names its install)."""
    if not reason:
        return "the replay was asked for"
    if "pycuda" in reason and "No module named" in reason:
        return "pycuda is not installed: `pip install -e '.[gpu]'` on a machine with a GPU"
    return reason


def replay_banner_text(evaluator: Any, why_not_gpu: str | None) -> str:
    """What a replay campaign says first: that there is no GPU and why, then whose measurements
    it replays: the GPU, the dates, the shapes and the number of points."""
    dataset = evaluator.dataset
    shapes = dataset.shapes()
    dates = dataset.provenance()[0]
    at = f"{len(shapes)} shapes ({', '.join(shapes)})" if len(shapes) > 1 else shapes[0]
    from rich.markup import escape

    return (f"No GPU here ({escape(why_no_gpu(why_not_gpu))}).\n"
            f"Replaying measurements of [bold]{evaluator.device.get('name')}[/] taken on "
            f"{dates}: {len(dataset.points)} points at {at}.")
