"""The examples the README and the docs show, run as they are against a running system: the
webhook receiver and the stream consumer of ``examples/``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from domain.webhooks import WebhookEndpoint
from tests.support.records import create_user
from tests.support.stack import Stack, eventually
from worker.local.embedded import free_port, port_open

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@contextmanager
def running(script: str, output: Path, *args: str, **env: str) -> Iterator[Path]:
    """``examples/<script>`` running in a process of its own; yields the file of its output."""
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script), *args],
            env={**os.environ, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        yield output
    finally:
        process.kill()
        process.wait()


def enable_a_user(stack: Stack) -> str:
    user_id = str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )
    with stack.http() as http:
        assert http.post(f"/v1beta1/users/{user_id}/enable", json={}).status_code == 200
    return user_id


def printed(output: Path, line: str) -> bool:
    return line in output.read_text().splitlines()


def test_the_stream_consumer_of_the_readme_prints_each_event(stack: Stack, tmp_path: Path) -> None:
    with running("stream_consumer.py", tmp_path / "consumer.out", REDIS_URL=stack.redis_url) as out:
        user_id = enable_a_user(stack)

        eventually(
            lambda: printed(out, f"user.enabled {user_id}"),
            20,
            f"the consumer to print the event (it printed {out.read_text()[-500:]!r})",
        )


def test_the_stream_consumer_survives_a_quiet_longer_than_its_socket_timeout(
    stack: Stack, tmp_path: Path
) -> None:
    # One read blocks 1 s, the socket waits 6 s: 7 s of quiet outlasts both (and redis-py's
    # default 5 s, which killed the consumer that blocked 5 s).
    with running(
        "stream_consumer.py",
        tmp_path / "consumer.out",
        REDIS_URL=stack.redis_url,
        BLOCK_SECONDS="1",
    ) as out:
        eventually(lambda: _reading(stack), 20, "the consumer to wait for events")
        time.sleep(7)
        assert "Traceback" not in out.read_text(), out.read_text()
        user_id = enable_a_user(stack)

        eventually(
            lambda: printed(out, f"user.enabled {user_id}"),
            20,
            f"the consumer to print the event (it printed {out.read_text()[-500:]!r})",
        )


def _reading(stack: Stack) -> bool:
    """Whether a client of the stack's Redis is blocked reading the stream (the consumer)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        return any(c.get("cmd") == "xreadgroup" for c in client.client_list())
    finally:
        client.close()


def test_the_webhook_receiver_of_the_readme_gets_signed_events(
    stack: Stack, tmp_path: Path
) -> None:
    port = free_port()
    endpoint = WebhookEndpoint.new(
        f"http://127.0.0.1:{port}/hook", ["user.enabled"], SystemClock().now()
    )
    with SqlUnitOfWork(stack.sessions) as uow:
        uow.webhook_endpoints.add(endpoint)
        uow.commit()
    try:
        with running(
            "webhook_receiver.py",
            tmp_path / "receiver.out",
            str(port),
            WEBHOOK_SECRET=endpoint.secret,
        ) as out:
            # A delivery that finds no one listening is retried after a backoff longer than
            # this test waits: the event is sent once the receiver listens.
            eventually(lambda: port_open("127.0.0.1", port), 20, "the receiver to listen")
            user_id = enable_a_user(stack)

            eventually(
                lambda: printed(out, f"user.enabled {user_id}"),
                20,
                f"the receiver to print the event (it printed {out.read_text()[-500:]!r})",
            )
    finally:
        with SqlUnitOfWork(stack.sessions) as uow:
            stored = uow.webhook_endpoints.get(endpoint.id, for_update=True)
            assert stored is not None
            stored.disable("the test is over", SystemClock().now())
            uow.webhook_endpoints.save(stored)
            uow.commit()
