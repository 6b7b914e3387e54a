"""Write the reference pages of docs/reference/ from the code: the CLI (every command's help),
the API (the OpenAPI schema's routes and schemas), the feedback record (its JSON Schema and the
candidate statuses), the settings (``core.settings.Settings``) and the tools in ``bench/``
(each one's docstring or header comment).

    python -m bench.reference_docs            # rewrite docs/reference/*.md
    python -m bench.reference_docs --check    # exit 1 naming the pages that are out of date

``tests/test_docs.py`` runs the check, so a change to a command, a route, the record, a setting
or a bench tool's description comes with its page.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference"
GENERATED = ("Generated from the code by `python -m bench.reference_docs`; do not edit by hand "
             "(`tests/test_docs.py` fails when it is out of date).")


def cell(text: Any) -> str:
    """``text`` fit for a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def help_markdown(text: str) -> list[str]:
    """A command's help as Markdown: its paragraphs, and its indented example lines in a code
    block (after ``Examples:``)."""
    text = text.replace("``", "`")
    prose, _, rest = text.partition("Examples:")
    examples = [line.strip() for line in rest.splitlines() if line.startswith("  ")]
    after = [line.strip() for line in rest.splitlines()
             if line.strip() and not line.startswith("  ")]
    out: list[str] = []
    for paragraph in prose.strip().split("\n\n"):
        if paragraph.strip():
            out += [" ".join(paragraph.split()), ""]
    if examples:
        out += ["```sh", *examples, "```", ""]
    if after:
        out += [" ".join(after), ""]
    return out


def first_paragraph(text: str) -> str:
    """The first paragraph of a help text, on one line."""
    return " ".join(text.replace("``", "`").strip().split("\n\n")[0].split())


# ---- the CLI ---------------------------------------------------------------------------------
def _commands(group: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for name, command in group.commands.items():
        if getattr(command, "hidden", False):
            continue
        path = f"{prefix} {name}"
        yield path, command
        if hasattr(command, "commands"):
            yield from _commands(command, path)


def cli_page() -> str:
    """Every command of ``tuneforge``: its help, usage, arguments and options."""
    import typer

    from cli.main import app

    root = typer.main.get_command(app)
    lines = ["# The `tuneforge` command", "", GENERATED, "",
             *help_markdown(root.help or ""), "| command | what it does |", "|---|---|"]
    entries = list(_commands(root, "tuneforge"))
    for path, command in entries:
        first = first_paragraph(command.help or "")
        anchor = re.sub(r"[^a-z0-9 -]", "", path.lower()).replace(" ", "-")
        lines.append(f"| [`{path}`](#{anchor}) | {cell(first)} |")
    lines.append("")
    for path, command in entries:
        ctx = typer.Context(command, info_name=path)
        lines += [f"## {path}", "", *help_markdown(command.help or ""),
                  "```text", command.get_usage(ctx).strip(), "```", ""]
        if hasattr(command, "commands"):
            continue
        rows = []
        for param in command.params:
            if param.param_type_name == "argument":
                meaning = getattr(param, "help", None) or ""
                rows.append((f"`{param.name.upper()}`", cell(param.display_type(ctx) or ""),
                             cell(meaning or ("(required)" if param.required else ""))))
                continue
            record = param.get_help_record(ctx)
            if record is None:
                continue
            decl, text = record
            name, _, kind = decl.partition(" ")
            rows.append((f"`{name}`", cell(kind.strip("<>") or "flag"), cell(text)))
        if rows:
            lines += ["| option | type | meaning |", "|---|---|---|"]
            lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ---- JSON Schema tables ----------------------------------------------------------------------
def _type(schema: dict[str, Any], link: Callable[[str], str]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return link(name)
    if "anyOf" in schema or "oneOf" in schema:
        parts = [_type(s, link) for s in schema.get("anyOf", schema.get("oneOf", []))]
        return " or ".join(dict.fromkeys(parts))
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type(schema["allOf"][0], link)
    if "enum" in schema:
        return " | ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}), link)}"
    if kind == "object" and "additionalProperties" in schema and \
            isinstance(schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'], link)}"
    return str(kind)


def _bounds(schema: dict[str, Any]) -> str:
    words = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<",
             "minLength": "length ≥", "maxLength": "length ≤", "minItems": "items ≥",
             "maxItems": "items ≤"}
    found = [f"{w} {schema[k]}" for k, w in words.items() if k in schema]
    for option in schema.get("anyOf", []):
        found += [f"{w} {option[k]}" for k, w in words.items() if k in option]
    return ", ".join(found)


def schema_table(schema: dict[str, Any], link: Callable[[str], str]) -> list[str]:
    """A Markdown table of an object schema's properties."""
    props = schema.get("properties", {})
    if not props:
        return [cell(schema.get("description", "")) or "(no fields)", ""]
    required = set(schema.get("required", []))
    lines = ["| field | type | required | default | meaning |", "|---|---|---|---|---|"]
    for name, prop in props.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        bounds = _bounds(prop)
        meaning = " ".join(x for x in (prop.get("description", ""), f"({bounds})" if bounds
                                        else "") if x)
        lines.append(f"| `{name}` | {cell(_type(prop, link))} | "
                     f"{'yes' if name in required else ''} | {cell(default)} | {cell(meaning)} |")
    return [*lines, ""]


# ---- the API ---------------------------------------------------------------------------------
def api_page() -> str:
    """Every route of the OpenAPI schema, then every schema it names."""
    from api.main import app

    spec = app.openapi()

    def link(name: str) -> str:
        return f"[{name}](#{name.lower()})"

    lines = ["# The HTTP API", "", GENERATED, "",
             f"{spec['info']['title']} {spec['info'].get('version', '')}. Every route is under "
             "`/api/v1`; all but `healthz` and `metrics` need the team's key in `X-API-Key`. A "
             "running server serves the same schema at `/api/v1/openapi.json` and a browsable "
             "page at `/api/v1/docs`. How to use it: [SERVICE.md](../SERVICE.md).", "",
             "| route | what it does |", "|---|---|"]
    routes = [(path, method, op) for path, ops in spec["paths"].items()
              for method, op in ops.items()]
    for path, method, op in routes:
        title = f"{method.upper()} {path}"
        anchor = re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")
        summary = first_paragraph(op.get("description") or op.get("summary") or "")
        lines.append(f"| [`{title}`](#{anchor}) | {cell(summary)} |")
    lines.append("")
    for path, method, op in routes:
        lines += [f"## {method.upper()} {path}", ""]
        if op.get("description"):
            lines += help_markdown(op["description"])
        params = op.get("parameters", [])
        if params:
            lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
            for p in params:
                schema = p.get("schema", {})
                bounds = _bounds(schema)
                meaning = " ".join(x for x in (p.get("description", ""),
                                               f"({bounds})" if bounds else "") if x)
                lines.append(f"| `{p['name']}` | {p['in']} | {cell(_type(schema, link))} | "
                             f"{'yes' if p.get('required') else ''} | {cell(meaning)} |")
            lines.append("")
        body = op.get("requestBody", {}).get("content", {})
        for media, content in body.items():
            lines += [f"Body ({media}): {_type(content.get('schema', {}), link)}", ""]
        lines += ["| status | meaning | body |", "|---|---|---|"]
        for code, answer in op.get("responses", {}).items():
            content = answer.get("content", {})
            shape = ", ".join(f"{_type(c.get('schema', {}), link)}" for c in content.values())
            lines.append(f"| {code} | {cell(answer.get('description', ''))} | {cell(shape)} |")
        lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [" ".join(schema["description"].split()), ""]
        lines += schema_table(schema, link)
    return "\n".join(lines).rstrip() + "\n"


# ---- the feedback record ---------------------------------------------------------------------
def feedback_page() -> str:
    """The feedback record's JSON Schema as tables, and the candidate statuses."""
    from core.feedback import json_schema
    from core.statuses import MEANING

    schema = json_schema()

    def link(name: str) -> str:
        return f"[{name}](#{name.lower()})"

    lines = ["# The feedback record", "", GENERATED, "",
             "One JSON document per candidate: what the agent reads, what `GET "
             "/campaigns/{id}/candidates/{cid}` answers and what `tuneforge evaluate` prints. Its "
             "JSON Schema is `core/feedback.schema.json` (generated from `core/feedback.py`). How "
             "to read one: [RESULTS.md](../RESULTS.md).", "",
             f"## {schema.get('title', 'FeedbackRecord')}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    lines += schema_table(schema, link)
    for name, sub in schema.get("$defs", {}).items():
        lines += [f"## {name}", ""]
        if sub.get("description"):
            lines += [" ".join(sub["description"].split()), ""]
        lines += schema_table(sub, link)
    lines += ["## Statuses", "", "A candidate's `status`: in flight, then one final outcome "
              "(`core/statuses.py`).", "", "| status | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {cell(meaning)} |" for name, meaning in MEANING.items()]
    return "\n".join(lines).rstrip() + "\n"


# ---- the settings ----------------------------------------------------------------------------
def settings_page() -> str:
    """Every ``TUNEFORGE_*`` setting: its type, default and meaning."""
    from core.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    lines = ["# Settings", "", GENERATED, "",
             "Every process reads its settings from the environment, each variable prefixed "
             f"`{prefix}`; a campaign's own settings (tolerance, budget, …) are resolved when "
             "it is created ([ARCHITECTURE.md](../ARCHITECTURE.md#where-each-setting-is-"
             "resolved)).", "",
             "| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        factory: Any = field.default_factory
        value = factory() if factory is not None else field.default
        if isinstance(value, Path):
            value = str(value).replace(str(Path.home()), "~", 1)
        default = json.dumps(value)
        kind = getattr(field.annotation, "__name__", str(field.annotation))
        lines.append(f"| `{prefix}{name.upper()}` | {cell(kind)} | `{cell(default)}` | "
                     f"{cell(field.description or '')} |")
    return "\n".join(lines).rstrip() + "\n"


# ---- the tools in bench/ ---------------------------------------------------------------------
def tool_text(path: Path) -> str:
    """What a tool in ``bench/`` says of itself: a module's docstring (read, not imported: a
    tool may import torch or pycuda), a shell script's header comment."""
    source = path.read_text()
    if path.suffix == ".py":
        return ast.get_docstring(ast.parse(source)) or ""
    lines = source.splitlines()[1:] if source.startswith("#!") else source.splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(header)


#: a usage line: environment assignments, then a command (``.venv/bin/python`` too), or the
#: assignments alone continued on the next line
USAGE = re.compile(r"(\[?[A-Z_]+=\S*\]? )*(\S*/)?(python3?|bash|make|tuneforge)\b"
                   r"|([A-Z_]+=\S* )+\\$")


def tool_markdown(text: str) -> list[str]:
    """A tool's description as Markdown: its first paragraph, then its usage lines (the indented
    lines that run a command, each with the lines that continue it: after a trailing backslash,
    or indented deeper) in a code block."""
    usage: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if indent < 2 or not USAGE.match(line.strip()):
            i += 1
            continue
        usage.append(line.strip())
        i += 1
        while i < len(lines) and lines[i].strip() and (
                usage[-1].endswith("\\") or len(lines[i]) - len(lines[i].lstrip()) > indent):
            usage.append("    " + lines[i].strip())
            i += 1
    out = [first_paragraph(text), ""]
    if usage:
        out += ["```sh", *usage, "```", ""]
    return out


def bench_page() -> str:
    """Every tool in ``bench/``: what it is for and how it is run, from its own text."""
    lines = ["# The tools in bench/", "", GENERATED, "",
             "The benchmarks print a short table and write their figures under `--out`; what they "
             "measured is recorded in [BENCHMARKS.md](../BENCHMARKS.md) and "
             "[GPU.md](../GPU.md) (date, GPU, commit, command), their raw records in `runs/`. "
             "Those that launch kernels run on the device machine ([GPU.md](../GPU.md#running-"
             "on-the-lent-gpu)); a module without usage lines is shared by the tools that "
             "import it.",
             ""]
    bench = ROOT / "bench"
    for path in sorted([*bench.glob("*.py"), *bench.glob("*.sh")], key=lambda p: p.name):
        if path.name == "__init__.py":
            continue
        lines += [f"## `bench/{path.name}`", "", *tool_markdown(tool_text(path))]
    return "\n".join(lines).rstrip() + "\n"


PAGES: dict[str, Callable[[], str]] = {
    "CLI.md": cli_page, "API.md": api_page, "FEEDBACK.md": feedback_page,
    "SETTINGS.md": settings_page, "BENCH.md": bench_page,
}


def stale() -> list[str]:
    """The reference pages whose text differs from what the code generates now."""
    return [name for name, page in PAGES.items()
            if not (OUT / name).exists() or (OUT / name).read_text() != page()]


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` say which are out of date."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if out of date")
    args = ap.parse_args(argv)
    if args.check:
        names = stale()
        if names:
            print(f"out of date: {', '.join(names)} (python -m bench.reference_docs)",
                  file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        (OUT / name).write_text(page())
        print(f"wrote docs/reference/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
