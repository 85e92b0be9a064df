"""The provider-call record (``domain/provider/calls.py``): one row per call, each written in
a short transaction of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Insert,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.models import ProviderCallRow
from domain.provider.calls import ProviderCall

_CALLS = cast(Table, ProviderCallRow.__table__)


def _recording(earlier: ColumnElement[bool] | None) -> Insert:
    """The one statement that records a call, numbering its attempt after the calls
    ``earlier`` matches (built once: a statement built for every call costs about as much as
    running it)."""
    attempt: Any = literal(1)
    if earlier is not None:
        counted = select(func.count()).select_from(ProviderCallRow).where(earlier)
        attempt = counted.scalar_subquery() + 1
    return insert(_CALLS).values(attempt=attempt)


_BY_KEY = _recording(ProviderCallRow.idempotency_key == bindparam("earlier_key"))
_BY_COMMAND_AND_SUBJECT = _recording(
    and_(
        ProviderCallRow.command_id == bindparam("earlier_command"),
        ProviderCallRow.operation == bindparam("earlier_operation"),
        ProviderCallRow.subject == bindparam("earlier_subject"),
    )
)
_BY_COMMAND_WITHOUT_SUBJECT = _recording(
    and_(
        ProviderCallRow.command_id == bindparam("earlier_command"),
        ProviderCallRow.operation == bindparam("earlier_operation"),
        ProviderCallRow.subject.is_(None),
    )
)
_FIRST_OF_ITS_KIND = _recording(None)


class SqlProviderCallLog:
    """The :class:`domain.provider.calls.ProviderCallLog` on the database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def record(self, call: ProviderCall) -> None:
        """One row, in one statement of its own transaction; its attempt counts the calls
        recorded before under the same idempotency key, or, for a call without one, by the
        same command about the same subject."""
        statement, earlier = self._numbered(call)
        row = {
            "command_id": call.command_id,
            "operation": call.operation[:64],
            "subject": None if call.subject is None else call.subject[:200],
            "idempotency_key": call.idempotency_key,
            "outcome": call.outcome.value,
            "error": None if call.error is None else call.error[:2000],
            "started_at": call.started_at,
            "duration_ms": call.duration_ms,
        }
        with self._sessions.begin() as session:
            session.execute(statement, {**row, **earlier})

    @staticmethod
    def _numbered(call: ProviderCall) -> tuple[Insert, dict[str, object]]:
        if call.idempotency_key is not None:
            return _BY_KEY, {"earlier_key": call.idempotency_key}
        if call.command_id is None:
            return _FIRST_OF_ITS_KIND, {}
        earlier: dict[str, object] = {
            "earlier_command": call.command_id,
            "earlier_operation": call.operation[:64],
        }
        if call.subject is None:
            return _BY_COMMAND_WITHOUT_SUBJECT, earlier
        return _BY_COMMAND_AND_SUBJECT, {**earlier, "earlier_subject": call.subject[:200]}

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` of the oldest calls made before ``before``; returns how
        many went."""
        oldest = (
            select(ProviderCallRow.id)
            .where(ProviderCallRow.started_at < before)
            .order_by(ProviderCallRow.started_at)
            .limit(limit)
        )
        with self._sessions.begin() as session:
            deleted = session.execute(
                delete(ProviderCallRow)
                .where(ProviderCallRow.id.in_(oldest))
                .execution_options(synchronize_session=False)
            )
            return cast(CursorResult[Any], deleted).rowcount
