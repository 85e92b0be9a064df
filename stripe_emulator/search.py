"""A subset of Stripe's Search Query Language (https://docs.stripe.com/search).

Supported: clauses ``field:value`` (exact match, case-insensitive for strings),
``field~"value"`` (substring, at least 3 characters), ``field>n``/``<``/``>=``/``<=`` on numeric
fields, ``metadata['key']:'value'`` (single or double quotes), negation with a leading ``-``,
and clauses joined by ``AND`` or by ``OR`` (Stripe does not allow mixing the two in one query).
Anything else is a 400 ``invalid_request_error`` on ``param: query``.

Unlike Stripe, results are visible immediately: Stripe's search index lags writes by up to a
minute, which tests against real Stripe have to tolerate but the emulator does not reproduce.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stripe_emulator.errors import StripeError, invalid
from stripe_emulator.state import Record

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<connector>AND|OR)(?=\s)
      | (?P<negate>-)?(?P<field>metadata\[(?:'[^']*'|"[^"]*")\]|[a-z_]+)
        (?P<op>>=|<=|:|~|>|<)
        (?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|null)
    )\s*""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Clause:
    field: str
    metadata_key: str | None
    op: str
    value: str | float | None
    negate: bool


@dataclass(frozen=True, slots=True)
class Query:
    clauses: tuple[Clause, ...]
    connector: str  # "AND" or "OR"


# Per resource: field name -> kind ("string" or "number").
CUSTOMER_FIELDS: Mapping[str, str] = {
    "email": "string",
    "name": "string",
    "phone": "string",
    "created": "number",
    "metadata": "metadata",
}
SUBSCRIPTION_FIELDS: Mapping[str, str] = {
    "status": "string",
    "customer": "string",
    "created": "number",
    "metadata": "metadata",
}


def parse(text: str, fields: Mapping[str, str], resource: str) -> Query:
    """Parse ``text``; raise a Stripe 400 on syntax errors or unsupported fields."""
    clauses: list[Clause] = []
    connectors: set[str] = set()
    position = 0
    expect_clause = True
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise _syntax_error(text, position)
        position = match.end()
        if match.group("connector"):
            if expect_clause:
                raise _syntax_error(text, match.start())
            connectors.add(match.group("connector"))
            expect_clause = True
            continue
        if not expect_clause:
            raise _syntax_error(text, match.start())
        clauses.append(_clause(match, fields, resource))
        expect_clause = False
    if not clauses or expect_clause:
        raise _syntax_error(text, len(text))
    if len(connectors) > 1:
        raise invalid(
            "Search query cannot combine AND and OR in the same query; use one of them.",
            "query",
        )
    return Query(tuple(clauses), connectors.pop() if connectors else "AND")


def _clause(match: re.Match[str], fields: Mapping[str, str], resource: str) -> Clause:
    field = match.group("field")
    op = match.group("op")
    raw_value = match.group("value")
    metadata_key: str | None = None
    if field.startswith("metadata["):
        metadata_key = field[10:-2]
        field = "metadata"
    kind = fields.get(field)
    if kind is None:
        raise invalid(
            f"Field `{field}` is an unsupported search field for resource `{resource}`. See "
            f"https://stripe.com/docs/search#query-fields-for-{resource} for a list of "
            "supported fields.",
            "query",
        )
    value: str | float | None
    if raw_value == "null":
        value = None
    elif raw_value[0] in "'\"":
        value = re.sub(r"\\(.)", r"\1", raw_value[1:-1])
    else:
        value = float(raw_value)
    if kind in ("string", "metadata"):
        if op not in (":", "~") or (kind == "metadata" and op == "~"):
            raise invalid(f"The `{op}` operator is not supported for field `{field}`.", "query")
        if not isinstance(value, str) and value is not None:
            raise invalid(f"Field `{field}` requires a quoted string value.", "query")
        if op == "~" and (value is None or len(value) < 3):
            raise invalid(
                "Substring matching (`~`) requires a value of at least 3 characters.", "query"
            )
    elif not isinstance(value, float):
        raise invalid(f"Field `{field}` requires a numeric value.", "query")
    elif op == "~":
        raise invalid(f"The `~` operator is not supported for field `{field}`.", "query")
    return Clause(field, metadata_key, op, value, match.group("negate") == "-")


def _syntax_error(text: str, position: int) -> StripeError:
    return invalid(
        f"Invalid search query at position {position}: {text!r}. Queries look like "
        "`email:'jenny@example.com' AND metadata['key']:'value'`; see "
        "https://stripe.com/docs/search#search-query-language.",
        "query",
    )


def matcher(query: Query) -> Callable[[Record], bool]:
    """A predicate selecting the records the query matches."""
    tests = [_clause_test(clause) for clause in query.clauses]
    if query.connector == "OR":
        return lambda record: any(test(record) for test in tests)
    return lambda record: all(test(record) for test in tests)


def _clause_test(clause: Clause) -> Callable[[Record], bool]:
    def test(record: Record) -> bool:
        if clause.metadata_key is not None:
            actual: Any = record.get("metadata", {}).get(clause.metadata_key)
        else:
            actual = record.get(clause.field)
        result = _compare(actual, clause.op, clause.value)
        return not result if clause.negate else result

    return test


def _compare(actual: Any, op: str, expected: str | float | None) -> bool:
    if expected is None:
        return actual is None
    if actual is None:
        return False
    if isinstance(expected, str):
        if op == "~":
            return expected.lower() in str(actual).lower()
        return str(actual).lower() == expected.lower()
    number = float(actual)
    return {
        ":": number == expected,
        ">": number > expected,
        "<": number < expected,
        ">=": number >= expected,
        "<=": number <= expected,
    }[op]


def result(
    records: Sequence[Record],
    params: Mapping[str, Any],
    url: str,
    render: Callable[[Record], Record] | None = None,
) -> Record:
    """A ``search_result`` page over ``records`` (the matches, newest first)."""
    offset = page_offset(params["page"]) if "page" in params else 0
    limit: int = params.get("limit", 10)
    page = records[offset : offset + limit]
    has_more = offset + limit < len(records)
    return {
        "object": "search_result",
        "data": [render(record) for record in page] if render else list(page),
        "has_more": has_more,
        "next_page": page_token(offset + limit) if has_more else None,
        "url": url,
        # Sent only when the client expands total_count (see expand.py), removed otherwise.
        "total_count": len(records),
    }


def page_token(offset: int) -> str:
    """An opaque ``next_page`` cursor."""
    raw = json.dumps({"offset": offset}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def page_offset(token: str) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        offset = json.loads(base64.urlsafe_b64decode(padded))["offset"]
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise invalid(f"Invalid page: {token}", "page") from error
    if not isinstance(offset, int) or offset < 0:
        raise invalid(f"Invalid page: {token}", "page")
    return offset
