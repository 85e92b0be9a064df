"""A field of a command's payload as SQL each database can index (issue 46).

An account's or a subscription's story finds its commands by the ids their payloads name
(``adapters/db/timelines.py``). Each of :data:`INDEXED_FIELDS` has a partial expression index
(``models.py``, migration 0020); a database uses an expression index only for the very
expression it was built on, so the field's name is written into the SQL as a literal (ours,
never a caller's), not sent as a parameter as SQLAlchemy's JSON paths are.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal

INDEXED_FIELDS = ("org_id", "billing_account_id", "subscription_id", "change_id")
"""The payload fields a story looks commands up by."""


class PayloadField(ColumnElement[str]):
    """``payload``'s top-level text field ``name`` (SQL ``NULL`` where it is absent)."""

    inherit_cache = True
    type = String()
    # What tells two of them apart in SQLAlchemy's statement cache.
    _traverse_internals = [
        ("payload", InternalTraversal.dp_clauseelement),
        ("name", InternalTraversal.dp_string),
    ]

    def __init__(self, payload: ColumnElement[Any] | InstrumentedAttribute[Any], name: str) -> None:
        if name not in INDEXED_FIELDS:
            raise ValueError(f"{name!r} is not an indexed payload field")
        self.payload: ColumnElement[Any] = (
            payload.expression if isinstance(payload, InstrumentedAttribute) else payload
        )
        self.name = name


def sql(dialect: str, payload: str, name: str) -> str:
    """The expression on ``dialect``, for the index and the queries alike."""
    if dialect == "postgresql":
        return f"({payload} ->> '{name}')"
    return f"json_extract({payload}, '$.{name}')"


@compiles(PayloadField)
def _compile(element: PayloadField, compiler: SQLCompiler, **kw: Any) -> str:
    return sql(compiler.dialect.name, compiler.process(element.payload, **kw), element.name)
