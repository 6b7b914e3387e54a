"""The command lists of ``tuneforge --help`` and of each command group at 80 columns: every
summary wraps only where the next word would not fit (a summary wrapped in the docstring
broke mid-sentence in Typer's rich mode)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from cli.main import app

_ROW = re.compile(r"^│ (\S+)?(\s+)(\S.*?)\s*│$")


def _groups() -> list[list[str]]:
    group = typer.main.get_group(app)
    return [[]] + [[name] for name, cmd in group.commands.items()
                   if isinstance(cmd, typer.core.TyperGroup)]


def _command_rows(text: str) -> dict[str, list[str]]:
    """Each command of the help's Commands panel with its summary's rendered lines."""
    panel = text.split("─ Commands ─", 1)[1].split("╰", 1)[0]
    rows: dict[str, list[str]] = {}
    name = ""
    for line in panel.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        if match.group(1):
            name = match.group(1)
            rows[name] = []
        rows[name].append(match.group(3))
    return rows


@pytest.mark.parametrize("group", _groups(), ids=lambda g: " ".join(g) or "tuneforge")
def test_every_summary_wraps_only_where_the_next_word_does_not_fit(group: list[str]) -> None:
    result = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    rows = _command_rows(result.output)
    assert len(rows) >= 1
    # the summary column's width: the panel's inner width less the name column
    width = max(len(line) for lines in rows.values() for line in lines)
    for name, lines in rows.items():
        for line, following in zip(lines, lines[1:], strict=False):
            next_word = following.split()[0]
            assert len(line) + 1 + len(next_word) > width - 1, (
                f"{' '.join(group)} {name}: the summary breaks after {line!r} though "
                f"{next_word!r} fits")
