"""Every message a stack recorded matches its JSON Schema under ``schemas/``.

The commands that succeeded are read from the ``commands`` table (their ``payload``: the
keyword arguments as published, with ``command_id``), the events from the ``events`` table
(their ``document``) when it exists. Each row is checked once: a check reads only the rows
it has not seen yet, so running it after every test stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from sqlalchemy import bindparam, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from adapters.contracts.schemas import REFRESH, SCHEMAS_DIR

MAX_ERRORS_PER_MESSAGE = 5
_CHUNK = 500


@cache
def validator(relative_path: str) -> Validator | None:
    """The validator of ``schemas/<relative_path>`` (formats checked), or ``None`` when there
    is no such file."""
    path = SCHEMAS_DIR / relative_path
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def violations(what: str, relative_path: str, document: Any) -> list[str]:
    """Why ``document`` (named ``what`` in the lines) does not match its schema: one line per
    violated path, empty when it matches."""
    checker = validator(relative_path)
    where = Path("schemas") / relative_path
    if checker is None:
        return [f"{what}: there is no schema {where} (run {REFRESH})"]
    errors = sorted(checker.iter_errors(document), key=lambda error: list(error.path))
    lines = [
        f"{what} does not match {where}: at {error.json_path}: {_short(error.message)}"
        for error in errors[:MAX_ERRORS_PER_MESSAGE]
    ]
    if len(errors) > MAX_ERRORS_PER_MESSAGE:
        lines.append(f"{what}: {len(errors) - MAX_ERRORS_PER_MESSAGE} more violations")
    return lines


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[:limit] + "…"


def _json(value: Any) -> Any:
    # SQLite hands the JSON columns of a raw query back as text; PostgreSQL decodes them.
    return json.loads(value) if isinstance(value, str | bytes) else value


class MessageCheck:
    """The checks of one database; remembers the rows it has checked."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self.commands_seen: set[str] = set()
        self.events_seen: set[int] = set()
        self.has_events_table = False

    def violations(self) -> list[str]:
        with self.sessions() as session:
            return [*self._commands(session), *self._events(session)]

    def _commands(self, session: Session) -> Iterable[str]:
        ids = session.execute(text("SELECT id FROM commands WHERE status = 'succeeded'"))
        new = sorted({str(row[0]) for row in ids} - self.commands_seen)
        query = text("SELECT id, type, payload FROM commands WHERE id IN :ids").bindparams(
            bindparam("ids", expanding=True)
        )
        for start in range(0, len(new), _CHUNK):
            for command_id, command_type, payload in session.execute(
                query, {"ids": new[start : start + _CHUNK]}
            ):
                payload = _json(payload)
                version = payload.get("version", 1) if isinstance(payload, dict) else 1
                yield from violations(
                    f"command {command_id} ({command_type})",
                    f"commands/{command_type}.v{version}.json",
                    payload,
                )
        self.commands_seen.update(new)

    def _events(self, session: Session) -> Iterable[str]:
        # The outbox's table comes with a later migration: until then there is nothing to read.
        if not self.has_events_table:
            self.has_events_table = inspect(session.connection()).has_table("events")
            if not self.has_events_table:
                return
        sequences = session.execute(text("SELECT sequence FROM events"))
        new = sorted({int(row[0]) for row in sequences} - self.events_seen)
        query = text(
            "SELECT sequence, id, type, version, document FROM events WHERE sequence IN :ids"
        ).bindparams(bindparam("ids", expanding=True))
        for start in range(0, len(new), _CHUNK):
            for sequence, event_id, event_type, version, document in session.execute(
                query, {"ids": new[start : start + _CHUNK]}
            ):
                yield from violations(
                    f"event {event_id} ({event_type} v{version}, sequence {sequence})",
                    f"events/{event_type}.v{version}.json",
                    _json(document),
                )
        self.events_seen.update(new)
