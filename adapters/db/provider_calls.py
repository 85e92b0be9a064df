"""The provider-call record (``domain/provider/calls.py``): one row per call, each written in
a short transaction of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.models import ProviderCallRow
from domain.provider.calls import ProviderCall


class SqlProviderCallLog:
    """The :class:`domain.provider.calls.ProviderCallLog` on the database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def record(self, call: ProviderCall) -> None:
        with self._sessions.begin() as session:
            session.add(
                ProviderCallRow(
                    command_id=call.command_id,
                    operation=call.operation[:64],
                    subject=None if call.subject is None else call.subject[:200],
                    idempotency_key=call.idempotency_key,
                    attempt=self._earlier_attempts(session, call) + 1,
                    outcome=call.outcome.value,
                    error=None if call.error is None else call.error[:2000],
                    started_at=call.started_at,
                    duration_ms=call.duration_ms,
                )
            )

    @staticmethod
    def _earlier_attempts(session: Session, call: ProviderCall) -> int:
        """Calls recorded before under the same idempotency key, or, for a call without
        one, by the same command about the same subject."""
        query = select(func.count()).select_from(ProviderCallRow)
        if call.idempotency_key is not None:
            query = query.where(ProviderCallRow.idempotency_key == call.idempotency_key)
        elif call.command_id is not None:
            query = query.where(
                ProviderCallRow.command_id == call.command_id,
                ProviderCallRow.operation == call.operation,
                ProviderCallRow.subject.is_(None)
                if call.subject is None
                else ProviderCallRow.subject == call.subject,
            )
        else:
            return 0
        return session.scalar(query) or 0

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
