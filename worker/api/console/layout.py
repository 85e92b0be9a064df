"""The console's page frame and the small helpers every page builds its HTML with.

Pages are server-rendered strings: each value is escaped where it is put in (``text``), and
free text (errors, names) goes through the masking rules first (``domain/redaction.py``), so
a page shows no more personal data than a log line does. Nothing is loaded from elsewhere:
the stylesheet is served by the API (``/console/static/console.css``) and no page has a
script, so the Content-Security-Policy forbids them outright.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import quote, urlencode

from fastapi.responses import HTMLResponse

from domain.redaction import mask_text

PREFIX = "/console"
STYLESHEET = f"{PREFIX}/static/console.css"


def is_console_path(path: str) -> bool:
    """Whether ``path`` is the console's (``/console`` or under it), page or not."""
    return path == PREFIX or path.startswith(f"{PREFIX}/")


NAV: tuple[tuple[str, str, str], ...] = (
    ("home", "Home", PREFIX),
    ("organizations", "Organizations", f"{PREFIX}/organizations"),
    ("accounts", "Accounts", f"{PREFIX}/accounts"),
    ("failures", "Failures", f"{PREFIX}/failures"),
    ("audit", "Audit", f"{PREFIX}/audit"),
)
"""(key, label, path) of each entry of the navigation; ``page(nav=key)`` marks the current."""

SECURITY_HEADERS = {
    # No script, no frame, no asset from elsewhere: nothing for an injected tag to run or load.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def text(value: object) -> str:
    """``value`` as HTML text: masked by the redaction rules, then escaped (``None`` → "")."""
    if value is None:
        return ""
    return html.escape(mask_text(str(value)), quote=True)


def url(*parts: str, **query: str | None) -> str:
    """A console path: ``url("accounts", "ba_1")`` → ``/console/accounts/ba_1``, each part
    quoted, with the query's non-empty values."""
    path = "/".join([PREFIX, *(quote(part, safe="") for part in parts)])
    kept = {key: value for key, value in query.items() if value}
    return f"{path}?{urlencode(kept)}" if kept else path


def link(href: str, label: object) -> str:
    return f'<a href="{html.escape(href, quote=True)}">{text(label)}</a>'


def when(value: datetime | str | None) -> str:
    """A time as the console shows it (UTC, to the second), in a ``<time>`` element."""
    if value is None or value == "":
        return ""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return f'<time datetime="{moment.isoformat()}">{moment:%Y-%m-%d %H:%M:%S}</time>'


def badge(state: object) -> str:
    """A state, styled by its name (``failed``, ``active``…)."""
    name = text(state)
    return f'<span class="state state-{name}">{name}</span>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """A table of cells that are HTML already (built with :func:`text`, :func:`link`…)."""
    if not rows:
        return f'<p class="empty">{text(empty)}</p>'
    head = "".join(f'<th scope="col">{text(header)}</th>' for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def facts(pairs: Sequence[tuple[str, str]] | Mapping[str, str]) -> str:
    """A definition list of (label, HTML value)."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    inner = "".join(f"<dt>{text(label)}</dt><dd>{value}</dd>" for label, value in items)
    return f'<dl class="facts">{inner}</dl>'


def section(title: str, body_html: str, *, id: str = "") -> str:
    anchor = f' id="{html.escape(id, quote=True)}"' if id else ""
    return f"<section{anchor}><h2>{text(title)}</h2>{body_html}</section>"


def _nav(current: str) -> str:
    items = "".join(
        f'<li><a href="{path}"{" aria-current=page" if key == current else ""}>{label}</a></li>'
        for key, label, path in NAV
    )
    return f'<nav aria-label="console"><ul>{items}</ul></nav>'


def page(
    title: str,
    body_html: str,
    nav: str = "home",
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """A whole console page: the frame, the navigation (``nav`` marks the current entry) and
    ``body_html`` (already escaped by its builder)."""
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)} · billing-worker console</title>"
        f'<link rel="icon" href="data:,"><link rel="stylesheet" href="{STYLESHEET}"></head><body>'
        f'<header><a class="brand" href="{PREFIX}">billing-worker console</a>{_nav(nav)}</header>'
        f"<main><h1>{text(title)}</h1>{body_html}</main></body></html>"
    )
    return HTMLResponse(
        document, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})}
    )


def message_page(
    title: str, message: str, *, status: int, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    """A page that only says something: a refusal, a missing account."""
    return page(
        title, f'<p class="message">{text(message)}</p>', nav="", status=status, headers=headers
    )
