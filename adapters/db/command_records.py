"""A command log entry as its readers see it: a frozen copy of the row, made in the
session that read it (``adapters/db/command_log.py``, ``adapters/db/command_runs.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Row

from adapters.db.models import CommandRow
from domain.messages import CommandStatus


@dataclass(frozen=True)
class CommandRecord:
    id: str
    type: str
    status: CommandStatus
    source: str
    payload: dict[str, Any]
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    retries: list[dict[str, Any]]
    client_id: str | None
    idempotency_key: str | None
    request_fingerprint: str | None
    fingerprint: str | None
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: CommandRow | Row[Any] | SimpleNamespace) -> CommandRecord:
        """Of the entry's row: an ORM row, a Core result row, or its columns' values."""
        return cls(
            id=row.id,
            type=row.type,
            status=CommandStatus(row.status),
            source=row.source,
            payload=dict(row.payload),
            attempts=row.attempts,
            result=row.result,
            error=row.error,
            retries=list(row.retries or []),
            client_id=row.client_id,
            idempotency_key=row.idempotency_key,
            request_fingerprint=row.request_fingerprint,
            fingerprint=row.fingerprint,
            created_at=row.created_at,
            updated_at=row.updated_at,
            published_at=row.published_at,
            finished_at=row.finished_at,
        )
