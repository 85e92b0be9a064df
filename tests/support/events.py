"""Reading the events of a test stack: its outbox table and its Redis stream."""

from __future__ import annotations

import json
from typing import Any, cast

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.models import EventRow

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
    for entry_id, fields in stream_entries(answer):
        event = json.loads(fields[b"event"])
        assert fields[b"id"].decode() == event["id"]
        assert fields[b"type"].decode() == event["type"]
        entries.append((entry_id, event))
        client.xack(STREAM, group, entry_id)
    return entries


def stream_entries(answer: Any) -> list[tuple[str, dict[bytes, bytes]]]:
    """``(entry id, fields)`` of an ``XREAD``/``XREADGROUP`` answer (redis-py types it
    loosely)."""
    entries: list[tuple[str, dict[bytes, bytes]]] = []
    for _stream, messages in cast(
        list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], answer or []
    ):
        entries.extend((entry_id.decode(), fields) for entry_id, fields in messages)
    return entries


def events_on_stream(client: redis.Redis) -> set[str]:
    """The stream's events as ``type key``: a user's by the user, an account's by the command
    that created it."""
    entries: Any = client.xrange(STREAM, "-", "+")
    keys = set()
    for _entry_id, fields in entries:
        event = json.loads(fields[b"event"])
        if event["type"] == "user.enabled":
            keys.add(f"user.enabled {event['subject']['id']}")
        else:
            keys.add(f"{event['type']} {event.get('command_id')}")
    return keys
