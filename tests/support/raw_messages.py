"""Raw messages pushed straight onto a queue with redis-py, the way a broken publisher would."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import redis

from adapters.messaging.dead_letters import DeadLetter, DeadLetters

EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def envelope(
    task: str = "users.enable",
    kwargs: dict[str, Any] | None = None,
    *,
    queue: str = "users",
    body: str | None = None,
    content_type: str = "application/json",
    headers: dict[str, Any] | None = None,
) -> bytes:
    """A kombu envelope of a Celery protocol 2 message, as kombu's Redis transport stores it;
    every part can be replaced by something broken."""
    task_id = str(uuid.uuid4())
    encoded = base64.b64encode(json.dumps([[], kwargs or {}, EMBED]).encode()).decode()
    return json.dumps(
        {
            "body": encoded if body is None else body,
            "content-encoding": "utf-8",
            "content-type": content_type,
            "headers": {"lang": "py", "task": task, "id": task_id, "root_id": task_id}
            if headers is None
            else headers,
            "properties": {
                "correlation_id": task_id,
                "reply_to": "",
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    ).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


POISON = {
    "body-is-an-object": envelope(body=b64(b'{"a": 1}')),
    "body-not-base64": envelope(body="%%% not base64 %%%"),
    "envelope-is-an-array": b'[{"body": "", "properties": {}}, 2, 3]',
    "not-json": b"\xff\xfe\x00 this is not JSON {",
}
"""The four raw messages that stopped a worker for good before the guard."""

REFUSED = {
    **POISON,
    "headers-without-a-task": envelope(headers={"lang": "py"}),
    "pickle": envelope(content_type="application/x-python-serialize", body=b64(b"\x80\x04K\x01.")),
    "over-the-size-cap": envelope(kwargs={"user_id": "u", "padding": "x" * (2 * 1024 * 1024)}),
    "unknown-task": envelope(task="users.explode"),
}


def push(redis_url: str, queue: str, raw: bytes) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.lpush(queue, raw)
    finally:
        client.close()


def dead_letters(redis_url: str) -> list[DeadLetter]:
    client = redis.Redis.from_url(redis_url)
    try:
        return DeadLetters(client).list(10_000)
    finally:
        client.close()


def dead_letter_of(redis_url: str, raw: bytes, queue: str, since: str) -> DeadLetter | None:
    """The dead letter recorded for ``raw`` pushed onto ``queue`` after the letter id
    ``since`` (matched by its bytes, or by its task id once Celery re-serialized it)."""
    try:
        task_id = json.loads(raw)["headers"]["id"]
    except Exception:
        task_id = None
    for letter in dead_letters(redis_url):
        if letter.queue != queue or _stream_order(letter.id) <= _stream_order(since):
            continue
        if (letter.raw and raw.startswith(letter.raw)) or (task_id and letter.task_id == task_id):
            return letter
    return None


def last_letter_id(redis_url: str) -> str:
    """The newest dead letter's id (``0-0`` when there is none): a mark to look after."""
    letters = dead_letters(redis_url)
    return letters[0].id if letters else "0-0"


def _stream_order(letter_id: str) -> tuple[int, int]:
    millis, _, sequence = letter_id.partition("-")
    return int(millis), int(sequence or 0)
