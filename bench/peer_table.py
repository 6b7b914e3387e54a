"""The peers benchmark's figures and table: ours against the vendor and each peer (their time
over ours, flushed and sustained), the same-bytes copy as a share of ours, the geometric means,
and the lines that say which peer failed (the elements a transpose got wrong) and how noisy the
vendor was; with a bundle, our library as the peers' harness timed it beside them. Softmax and
the transpose share one layout: x the vendor, torch.compile, the textbook Triton launch and the
best Triton launch, then % of the copy. Plain dicts in, text out: what :mod:`bench.peer_quality`
prints last and the tests read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bench.peer_families import LIBRARY_PEER, VENDOR_PEER

#: the peers set against ours in the table, after the vendor (``triton best``: the fastest
#: correct Triton launch of the shape)
PEER_COLUMNS = {"softmax": ("torch.compile", "triton", "triton best"),
                "transpose": ("torch.compile", "triton", "triton best"),
                "gemm_bias_relu": ("cuBLAS bf16x3", "cuBLAS bf16x3 chained",
                                   "cuBLAS bf16x3 + split", "compiled bf16x3 + split",
                                   "Triton bf16x3")}
#: the same-bytes ceiling, where a family has one
COPY_PEER = "copy"
#: the table's header of each column
HEADERS = {"torch.softmax": "x torch", "torch transpose": "x torch", "torch.compile": "x compile",
           "triton": "x triton", "triton best": "x tri best", "cuBLAS fp32": "x cuBLAS",
           "cuBLAS bf16x3": "x cuB3 ahead",
           "cuBLAS bf16x3 chained": "x cuB3 chain", "cuBLAS bf16x3 + split": "x cuB3 split",
           "compiled bf16x3 + split": "x comp3 split",
           "Triton bf16x3": "x Tri bf16x3"}

#: what the short headers of a family's columns stand for, after the table's title
LEGENDS = {"gemm_bias_relu": " · cuB3: three cuBLAS bf16 GEMMs, operands split into bf16 parts"
                             " ahead (untimed) or in each call; chain: products added in"
                             " cuBLAS's epilogue; comp3: that call through torch.compile",
           "transpose": " · torch: y.copy_(x.t())"}


def peer_times(entry: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """A peer's flushed median and sustained time (the faster of back-to-back calls and graph
    replays), None where it has none or failed its check."""
    if not entry or entry.get("error") or not (entry.get("correctness") or {}).get("passed"):
        return None, None
    sustained = [v for v in (entry.get("sustained_us"), entry.get("graph_us")) if v]
    return entry.get("avg_us"), (min(sustained) if sustained else None)


def best_of(peers: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    """The entry of the fastest correct peer whose name starts with ``prefix`` (flushed), with
    the sustained time the fastest of theirs; None when none passed."""
    times = [(peer_times(e), name) for name, e in peers.items() if name.startswith(prefix)]
    times = [(t, n) for t, n in times if t[0]]
    if not times:
        return None
    (flushed, _), name = min(times, key=lambda t: t[0][0] or math.inf)
    sustained = [t[1] for t, _ in times if t[1]]
    return {"peer": name, "avg_us": flushed, "sustained_us": min(sustained) if sustained else None,
            "correctness": {"passed": True}}


def column_entry(peers: dict[str, Any], column: str) -> dict[str, Any] | None:
    """The peer entry a table column reads (``triton best``: :func:`best_of` the Triton
    launches)."""
    if column == "triton best":
        return best_of(peers, "triton")
    return peers.get(column)


def ratio(theirs: float | None, ours: float | None) -> float | None:
    """Their time over ours (above 1: ours is faster), None when either is missing."""
    return round(theirs / ours, 3) if theirs and ours else None


def summary_rows(name: str, ours: list[dict[str, Any]], peers: dict[str, Any]) -> list[dict]:
    """One row per measured point of ours: its times, and against the vendor, each column's
    peer and the same-bytes copy (flushed, sustained)."""
    shapes = peers.get("shapes", {})
    columns = [VENDOR_PEER[name], *PEER_COLUMNS[name]]
    rows = []
    for r in ours:
        at = (shapes.get(r["shape"]) or {}).get("peers", {})
        us = (r.get("perf") or {}).get("avg_us") if r.get("status") == "ok" else None
        sus = (r.get("sustained") or {}).get("us_per_launch")
        row: dict[str, Any] = {"shape": r["shape"], "label": r["label"],
                               "status": r.get("status") or r.get("compile"),
                               "error": r.get("error"), "us": us, "sustained_us": sus,
                               "worst_err": worst_error(r.get("correctness")),
                               **against(at, columns, us, sus)}
        flops = flop_count(name, r["shape"])
        if flops and us:
            row["tflops"] = round(flops / us / 1e6, 1)
        rows.append(row)
    return rows


def against(at: dict[str, Any], columns: Sequence[str], us: float | None,
            sus: float | None) -> dict[str, Any]:
    """Times ``us`` / ``sus`` (flushed, sustained) set against the peers ``at`` one shape:
    ``x``, each column's peer time over them; ``pct_copy``, where the run has a same-bytes
    copy, its time as a percentage of them."""
    out: dict[str, Any] = {"x": {}}
    for col in columns:
        theirs, theirs_sus = peer_times(column_entry(at, col))
        out["x"][col] = (ratio(theirs, us), ratio(theirs_sus, sus))
    if COPY_PEER in at:
        copy, copy_sus = peer_times(at[COPY_PEER])
        out["pct_copy"] = (pct(copy, us), pct(copy_sus, sus))
    return out


def pct(copy_us: float | None, ours_us: float | None) -> float | None:
    """The same-bytes copy's time as a percentage of ours (100: ours runs at the copy's rate)."""
    return round(100.0 * copy_us / ours_us, 1) if copy_us and ours_us else None


def flop_count(name: str, shape: str) -> float | None:
    """The GEMM's 2·M·N·K at ``shape``; None for other families."""
    if name != "gemm_bias_relu":
        return None
    m, n, k = (int(v) for v in shape.split("x"))
    return 2.0 * m * n * k


def worst_error(correctness: dict[str, Any] | None) -> float | None:
    """The larger of the norm-relative and the largest scaled error."""
    if not correctness:
        return None
    values = [correctness.get("rel_err"), correctness.get("max_scaled_err")]
    found = [float(v) for v in values if v is not None]
    return max(found) if found else None


def geomean(values: Sequence[float | None]) -> float | None:
    """Geometric mean of the values present, None when there are none."""
    got = [v for v in values if v]
    return math.prod(got) ** (1.0 / len(got)) if got else None


def _pair(pair: tuple[float | None, float | None] | None, digits: int = 2) -> str:
    if not pair:
        return "-"
    return "/".join("-" if v is None else f"{v:.{digits}f}" for v in pair)


def format_table(name: str, rows: list[dict[str, Any]], device: str) -> list[str]:
    """The family's table: shape, label, ours (flushed/sustained µs), x each column, % of the
    same-bytes copy (or TFLOP/s), worst error; then the geometric means over our fastest point
    at each shape."""
    columns = [VENDOR_PEER[name], *PEER_COLUMNS[name]]
    has_copy = any("pct_copy" in r for r in rows)
    last = "% copy" if has_copy else "TFLOP/s"
    lines = [f"{name} on {device} · flushed/sustained · x = their time / ours"
             + (" · % copy = same-bytes copy time / ours" if has_copy else "")
             + LEGENDS.get(name, "")]
    head = f"{'shape':>15s} {'label':22s} {'ours us':>15s}"
    head += _heads(columns)
    lines.append(head + f" {last:>11s} {'err':>8s}")
    for r in rows:
        line = f"{r['shape']:>15s} {r['label'][:22]:22s} "
        if not r["us"]:
            lines.append(line + f"{r['status']}: {(r.get('error') or '')[:70]}")
            continue
        tail = _pair(r.get("pct_copy"), 1) if has_copy else f"{r.get('tflops') or 0:.1f}"
        lines.append(line + _cells(r, columns) + f" {tail:>11s} {_err(r['worst_err'])}")
    fastest = fastest_rows(rows)
    lines.append(f"{'geomean':>15s} {f'our best at {len(fastest)} shape(s)':22s} {'':>15s}"
                 + _means(fastest, columns))
    return lines


def _heads(columns: Sequence[str]) -> str:
    """The columns' short headers, as wide as their cells."""
    return "".join(f" {HEADERS.get(c, 'x ' + c)[:13]:>13s}" for c in columns)


def _cells(row: dict[str, Any], columns: Sequence[str]) -> str:
    """A table row's times (flushed/sustained µs) and its ratio to each column's peer."""
    return (f"{_pair((row['us'], row['sustained_us']), 1):>15s}"
            + "".join(f" {_pair(row['x'][c]):>13s}" for c in columns))


def _err(err: float | None) -> str:
    return f"{'-' if err is None else f'{err:8.1e}':>8s}"


def _means(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """The geometric mean of each column's ratios over ``rows``, flushed/sustained."""
    out = ""
    for c in columns:
        pair = (geomean([r["x"][c][0] for r in rows]), geomean([r["x"][c][1] for r in rows]))
        out += f" {_pair(pair):>13s}"
    return out


def fastest_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our fastest measured point at each shape (flushed), in the rows' order of shapes."""
    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["us"] and (r["shape"] not in best or r["us"] < best[r["shape"]]["us"]):
            best[r["shape"]] = r
    return list(best.values())


def peer_problems(peers: dict[str, Any]) -> list[str]:
    """One line per peer that failed to build, run or check, or whose graph capture failed,
    and per shape skipped."""
    lines = []
    for name, fam in (peers.get("families") or {}).items():
        for shape, at in fam.get("shapes", {}).items():
            if at.get("skipped"):
                lines.append(f"{name} {shape}: skipped ({at['skipped']})")
            for peer, e in at.get("peers", {}).items():
                corr = e.get("correctness") or {}
                if e.get("error"):
                    lines.append(f"{name} {shape} {peer}: {e['error'][:110]}")
                elif not corr.get("passed"):
                    unequal = (f", {corr['unequal']} unequal" if corr.get("unequal")
                               else "")
                    lines.append(f"{name} {shape} {peer}: wrong (rel {corr.get('rel_err')}, "
                                 f"scaled {corr.get('max_scaled_err')}{unequal})")
                if e.get("graph_error"):
                    lines.append(f"{name} {shape} {peer}: no graph ({e['graph_error'][:90]})")
    return lines


def vendor_noise(name: str, peers: dict[str, Any]) -> str:
    """The vendor timed first and last at each shape: the largest spread, flushed."""
    vendor = VENDOR_PEER[name]
    spreads = []
    for at in (peers.get("families", {}).get(name, {}).get("shapes") or {}).values():
        first, again = (at.get("peers") or {}).get(vendor), (at.get("peers") or {}).get(
            f"{vendor} again")
        a, b = peer_times(first)[0], peer_times(again)[0]
        if a and b:
            spreads.append(abs(a - b) / min(a, b))
    return (f"{vendor} timed twice a shape: spread up to {100 * max(spreads):.1f} %"
            if spreads else f"{vendor} timed twice a shape: no pair")


def library_rows(name: str, peers: dict[str, Any], summary: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """At each shape where the peers' harness timed our library (``tuneforge library``, a
    bundle's kernel through its loader): its times, each column's peer against it (their
    time over the library's) and the same-bytes copy, all from that one harness; and
    ``child``: our fastest point at the shape as the evaluation child timed it (``summary``:
    :func:`summary_rows`), over the library's time (above 1: the child's figure is the
    slower)."""
    columns = [VENDOR_PEER[name], *PEER_COLUMNS[name]]
    child = {r["shape"]: r for r in fastest_rows(summary)}
    rows = []
    for shape, at in (peers.get("shapes") or {}).items():
        found = (at.get("peers") or {}).get(LIBRARY_PEER)
        if not found:
            continue
        us, sus = peer_times(found)
        row: dict[str, Any] = {"shape": shape, "us": us, "sustained_us": sus,
                               "error": found.get("error") or (
                                   None if us else "wrong (its check failed)"),
                               "worst_err": worst_error(found.get("correctness")),
                               **against(at.get("peers") or {}, columns, us, sus)}
        mine = child.get(shape)
        row["child"] = ((ratio(mine["us"], us), ratio(mine["sustained_us"], sus))
                        if mine else None)
        rows.append(row)
    return rows


def format_library_table(name: str, rows: list[dict[str, Any]], device: str) -> list[str]:
    """The library's rows (:func:`library_rows`) as a table, then the geometric means; nothing
    when the peers' harness timed no library."""
    if not rows:
        return []
    columns = [VENDOR_PEER[name], *PEER_COLUMNS[name]]
    lines = [f"{name}: our library through its loader, in the peers' harness, on {device} · "
             f"x = their time / the library's · child = the evaluation child's time / it"]
    head = f"{'shape':>15s} {'library us':>15s}"
    head += _heads(columns)
    lines.append(head + f" {'% copy':>11s} {'child':>11s} {'err':>8s}")
    for r in rows:
        line = f"{r['shape']:>15s} "
        if not r["us"]:
            lines.append(line + f"{(r.get('error') or '')[:70]}")
            continue
        lines.append(line + _cells(r, columns) + f" {_pair(r.get('pct_copy'), 1):>11s}"
                     f" {_pair(r['child']):>11s} {_err(r['worst_err'])}")
    timed = [r for r in rows if r["us"]]
    lines.append(f"{'geomean':>15s} {f'{len(timed)} shape(s)':>15s}" + _means(timed, columns))
    return lines
