"""URLs as they may be shown: a password never printed."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def masked_url(url: str) -> str:
    """``url`` with its password shown as ``***``: what is printed of a URL (an error may name
    the URL it tried; ``up``'s banner names Redis's and the database's)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
    except ValueError:
        return "(an unreadable URL)"
