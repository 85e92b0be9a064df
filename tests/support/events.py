"""Reading the events of a test stack: its outbox table and its Redis stream."""

from __future__ import annotations

import json
from typing import Any

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from worker.db.models import EventRow

STREAM = "billing:events"


def outbox_rows(sessions: sessionmaker[Session], subject_key: str) -> list[EventRow]:
    """The outbox rows of one subject, in outbox order."""
    with sessions() as session:
        return list(
            session.scalars(
                select(EventRow)
                .where(EventRow.subject_key == subject_key)
                .order_by(EventRow.sequence)
            ).all()
        )


def read_group(
    client: redis.Redis, group: str, consumer: str, *, count: int = 100, block_ms: int = 200
) -> list[tuple[str, dict[str, Any]]]:
    """One ``XREADGROUP`` of new entries, acknowledged: ``(entry id, event)`` pairs."""
    answer = client.xreadgroup(group, consumer, {STREAM: ">"}, count=count, block=block_ms)
    entries: list[tuple[str, dict[str, Any]]] = []
    for _stream, messages in answer or []:
        for entry_id, fields in messages:
            event = json.loads(fields[b"event"])
            assert fields[b"id"].decode() == event["id"]
            assert fields[b"type"].decode() == event["type"]
            entries.append((entry_id.decode(), event))
            client.xack(STREAM, group, entry_id)
    return entries
