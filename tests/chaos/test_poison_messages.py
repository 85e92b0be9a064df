"""Poison already in Redis when a worker starts: before the guard, such a message stopped
every start of every worker (it was restored to the queue each time)."""

from __future__ import annotations

import uuid

import pytest
from celery import Celery

from adapters.clock import SystemClock
from tests.chaos.conftest import StackFactory
from tests.support.raw_messages import POISON, dead_letters, push
from tests.support.records import create_user, user_state
from tests.support.stack import eventually

pytestmark = pytest.mark.chaos


def test_a_worker_starting_on_poisoned_queues_dead_letters_them_and_runs_the_rest(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({})
    for queue in ("users", "billing"):
        for raw in POISON.values():
            push(stack.redis_url, queue, raw)
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    command_id = str(uuid.uuid4())
    publisher = Celery("another-service", broker=stack.redis_url)
    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": user.id}, queue="users"
    )
    publisher.close()

    stack.start_worker("w1", concurrency=1)

    assert stack.finished(command_id, timeout=30).status.value == "succeeded"
    assert user_state(stack.sessions, str(user.id)) == "enabled"
    eventually(lambda: len(dead_letters(stack.redis_url)) >= 8, what="eight dead letters")
    letters = dead_letters(stack.redis_url)
    assert {letter.queue for letter in letters} == {"users", "billing"}
    assert all(child.process.poll() is None for child in stack.group.children)

    stack.stop()  # and a restart on the same Redis comes up and works
    stack.start_worker("w2", concurrency=1)
    again = str(uuid.uuid4())
    publisher = Celery("another-service", broker=stack.redis_url)
    publisher.send_task(
        "users.enable", kwargs={"command_id": again, "user_id": user.id}, queue="users"
    )
    publisher.close()
    assert stack.finished(again, timeout=30).status.value == "succeeded"
