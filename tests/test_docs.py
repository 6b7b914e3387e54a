"""The documentation holds together: every relative link of the README, docs/ and the run index
names a file of the repository (and a heading of it, when it has an anchor), every
``docs/NAME.md#anchor`` the code cites names a heading that exists, and the reference pages
(docs/reference/) are what the code generates now."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from repo import ROOT

#: ``[text](target)`` of Markdown, images included; not inside inline code
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: ``docs/NAME.md#anchor`` as code and comments cite a section
CITED = re.compile(r"\b(docs/[A-Za-z_/]+\.md)#([a-z0-9_-]+)")


def tracked(*patterns: str) -> list[Path]:
    """Tracked files matching the git pathspecs (files of the working tree that git knows)."""
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode()
    return [ROOT / p for p in out.split("\0") if p and (ROOT / p).exists()]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (a repeated heading gets ``-1``, ``-2``, …)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, outside code blocks and inline code."""
    found: list[str] = []
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"^[a-z]+:", target):
                found.append(target)
    return found


def broken(source: Path, target: str) -> str | None:
    """Why ``target``, linked from ``source``, leads nowhere (None: it resolves)."""
    name, _, anchor = target.partition("#")
    dest = (source.parent / name).resolve() if name else source
    shown = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
    if not dest.exists():
        return f"{shown}: {target} (no such file)"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{shown}: {target} (no heading #{anchor})"
    return None


def test_slugs_follow_github() -> None:
    assert slug("Live beside Kernel Tuner 1.5") == "live-beside-kernel-tuner-15"
    assert slug("Service: event stream latency") == "service-event-stream-latency"
    assert slug("The compute-sanitizer gate (`worker/sanitize.py`, `tuneforge sanitize`)") == \
        "the-compute-sanitizer-gate-workersanitizepy-tuneforge-sanitize"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n[ok](#title) [gone](missing.md) [no heading](a.md#nowhere)\n"
                   "`[in code](missing.md)`\n```\n[fenced](missing.md)\n```\n")
    problems = [broken(doc, t) for t in links(doc)]
    assert [p is not None for p in problems] == [False, True, True]


@pytest.mark.parametrize("doc", tracked("README.md", "docs/*.md", "docs/**/*.md",
                                        "runs/README.md"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    problems = [p for t in links(doc) if (p := broken(doc, t))]
    assert not problems, "\n".join(problems)


def test_every_cited_section_exists() -> None:
    problems = []
    for source in tracked("*.py", "*.j2", "*.json", "*.toml", "Makefile"):
        if source == Path(__file__).resolve():
            continue
        for doc, anchor in CITED.findall(source.read_text(errors="replace")):
            target = ROOT / doc
            if not target.exists() or anchor not in anchors(target):
                problems.append(f"{source.relative_to(ROOT)}: {doc}#{anchor}")
    assert not problems, "\n".join(problems)


def test_the_reference_pages_are_current() -> None:
    from bench.reference_docs import stale

    assert not stale(), (f"docs/reference/ out of date: {', '.join(stale())}; "
                         "run `make docs` (python -m bench.reference_docs)")


def test_a_bench_tools_usage_lines_are_found_with_their_continuations() -> None:
    """The BENCH page takes a tool's first paragraph and the indented lines that run a
    command, with what continues them (a trailing backslash, or deeper indentation), and
    leaves the prose and an example's data out."""
    from bench.reference_docs import tool_markdown

    text = ("What it does,\non two lines.\n\nMore prose.\n\n"
            "    python bench/x.py --out out/      # a comment\n"
            "    SPEC=examples/t BUDGET=3 \\\n"
            "      bash bench/y.sh t 64x64\n"
            "    .venv/bin/python -m bench.z [--tree DIR]\n"
            "        [--streams 1]\n"
            "    {\"json\": 1}\n")
    assert tool_markdown(text) == [
        "What it does, on two lines.", "", "```sh",
        "python bench/x.py --out out/      # a comment",
        "SPEC=examples/t BUDGET=3 \\", "    bash bench/y.sh t 64x64",
        ".venv/bin/python -m bench.z [--tree DIR]", "    [--streams 1]", "```", ""]
    assert tool_markdown("Shared helpers.\n\n    {\"a\": 1}\n") == ["Shared helpers.", ""]
