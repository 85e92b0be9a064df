"""Reading a request body strictly: one JSON object, as RFC 8259 says and nothing it allows
an implementation to guess at.

* UTF-8 only, without a byte order mark (``json.loads`` on bytes would also take UTF-16 and
  UTF-32);
* no duplicate member names (the standard leaves their meaning open, so a request could mean
  one thing to us and another to a proxy);
* no ``NaN`` or ``Infinity`` (not JSON; Python's parser accepts them by default);
* at most :data:`MAX_DEPTH` levels of nesting (a body nested hundreds of levels deep is an
  attack on the parser, never a request);
* no C0 control character (U+0000 to U+001F) in any string, names included: no field of the
  spec holds one, PostgreSQL's JSONB refuses U+0000, and CR LF in a name would forge log lines.

Every problem is a :class:`BodyRejected` naming the offending field as the request names it.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32
_CONTROL = re.compile(r"[\x00-\x1f]")
_NO_CONTROL = "control characters (U+0000 to U+001F) are not allowed"


class BodyRejected(Exception):
    """The body is refused: ``message``, and each ``(field, description)`` violation."""

    def __init__(
        self,
        message: str,
        field: str = "body",
        description: str = "",
        *,
        more: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.violations = [(field, description or message), *(more or [])]


class _DuplicateName(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


class _NotJsonNumber(Exception):
    def __init__(self, constant: str) -> None:
        self.constant = constant


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise _DuplicateName(name)
        found[name] = value
    return found


def _reject_constant(constant: str) -> Any:
    raise _NotJsonNumber(constant)


def parse_object(raw: bytes, *, control_characters: bool = False) -> dict[str, Any]:
    """The JSON object in ``raw``, or :class:`BodyRejected`. ``control_characters``: let
    strings hold them (a body we only route by a few checked fields, such as Stripe's
    events, whose texts may hold line breaks)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRejected("the body is not UTF-8", "body", "must be UTF-8 JSON") from None
    if text.startswith("\ufeff"):
        raise BodyRejected("the body starts with a byte order mark", "body", "no BOM in JSON")
    try:
        body = json.loads(
            text, object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant
        )
    except _DuplicateName as duplicate:
        raise BodyRejected(
            "the body names a field twice", duplicate.name, "appears more than once"
        ) from None
    except _NotJsonNumber as constant:
        raise BodyRejected(
            f"{constant.constant} is not JSON", "body", f"{constant.constant} is not a number"
        ) from None
    except RecursionError:
        raise BodyRejected("the body is nested too deeply", "body", "nested too deeply") from None
    except ValueError:
        raise BodyRejected("the body is not valid JSON", "body", "invalid JSON") from None
    if not isinstance(body, dict):
        raise BodyRejected("the body must be a JSON object", "body", "not an object")
    _check_depth_and_text(body, control_characters)
    return body


def _check_depth_and_text(body: dict[str, Any], control_characters: bool) -> None:
    """Walk the parsed body (without recursion): depth, and control characters. Every field
    holding a control character is named at once; a body nested too deeply stops the walk."""
    controlled: list[tuple[str, str]] = []
    pending: list[tuple[Any, str, int]] = [(body, "", 1)]
    while pending:
        value, path, depth = pending.pop()
        if isinstance(value, dict | list) and depth > MAX_DEPTH:
            raise BodyRejected(
                f"the body is nested more than {MAX_DEPTH} levels deep",
                path or "body",
                f"more than {MAX_DEPTH} levels deep",
            )
        if isinstance(value, dict):
            for name, item in value.items():
                field = f"{path}.{name}" if path else name
                if not control_characters and _CONTROL.search(name):
                    controlled.append((json.dumps(field), _NO_CONTROL))
                    continue
                pending.append((item, field, depth + 1))
        elif isinstance(value, list):
            pending.extend(
                (item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)
            )
        elif isinstance(value, str) and not control_characters and _CONTROL.search(value):
            controlled.append((path, _NO_CONTROL))
    if controlled:
        first, *rest = sorted(controlled)
        raise BodyRejected(
            "a field holds a control character"
            if len(controlled) == 1
            else f"{len(controlled)} fields hold control characters",
            *first,
            more=rest,
        )
