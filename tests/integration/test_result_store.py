"""The result backend (``adapters.messaging.result_store``) on a real Redis: a success is
stored without reading what is stored first, and no other state overwrites a success."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery, states
from celery.backends.redis import RedisBackend

from adapters.messaging.result_store import CommandResults

DB = 14
"""A Redis database no stack of the session uses."""


@pytest.fixture
def app() -> Iterator[Celery]:
    app = Celery("result-store-tests", set_as_current=False)
    app.conf.update(result_serializer="json", accept_content=["json"])
    yield app
    app.close()


@pytest.fixture
def without_reads(redis_server: str) -> Iterator[str]:
    """A Redis user who may do anything but ``GET``: the URL of this test's database as
    that user."""
    admin = redis.Redis.from_url(f"{redis_server}/{DB}")
    user = f"no-reads-{uuid.uuid4().hex[:8]}"
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-get"
    )
    host = redis_server.split("://", 1)[1].rsplit("@", 1)[-1]  # the server's password dropped
    yield f"redis://{user}:secret@{host}/{DB}"
    admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
    admin.close()


def test_a_success_is_stored_without_reading_what_is_stored(
    app: Celery, without_reads: str
) -> None:
    ours = CommandResults(app=app, url=without_reads)
    celerys = RedisBackend(app=app, url=without_reads)
    task_id = str(uuid.uuid4())

    ours.store_result(task_id, {"user_id": "usr_1"}, states.SUCCESS)

    with pytest.raises(redis.exceptions.NoPermissionError):  # Celery's own reads first
        celerys.store_result(str(uuid.uuid4()), {"user_id": "usr_1"}, states.SUCCESS)
    assert ours.client.exists(ours.get_key_for_task(task_id)) == 1


def test_a_retry_stored_after_a_success_leaves_the_success(app: Celery, redis_server: str) -> None:
    results = CommandResults(app=app, url=f"{redis_server}/{DB}")
    task_id = str(uuid.uuid4())

    results.store_result(task_id, {"user_id": "usr_1"}, states.SUCCESS)
    results.store_result(task_id, RuntimeError("a duplicate delivery's retry"), states.RETRY)
    results.store_result(task_id, RuntimeError("its failure"), states.FAILURE)

    meta = results.get_task_meta(task_id)
    assert (meta["status"], meta["result"]) == (states.SUCCESS, {"user_id": "usr_1"})
