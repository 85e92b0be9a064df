"""The running command's context (``application.log_context``) is set and reset with tokens around
each task run, however the run ends: a retry (after which Celery calls no ``after_return``)
leaves nothing bound for the next run in the same process, a sweep for instance."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from celery.signals import task_postrun

from application import log_context
from tasks.runtime import ApplicationTask


@pytest.fixture(autouse=True)
def nothing_bound() -> Iterator[None]:
    """This process's context as a worker's pool process starts: no command bound."""
    log_context.unbind()
    yield
    log_context.unbind()


def fields_of(command_id: str) -> dict[str, str | int]:
    return log_context.command_fields(
        command_id=command_id,
        task="billing.create_account",
        task_id=f"t-{command_id}",
        attempt=1,
        values={"org_id": "org_a"},
    )


def a_task() -> ApplicationTask:
    app = Celery("log-context-tests", set_as_current=False)

    @app.task(base=ApplicationTask, bind=True, name="tests.log_context")
    def run(self: ApplicationTask) -> None:  # pragma: no cover - never called
        return None

    task: Any = run
    return task  # type: ignore[no-any-return]


def one_run(task: ApplicationTask, bound: str | None, state: str) -> dict[str, Any]:
    """A run as Celery's tracer makes it: ``before_start``, the body (which binds ``bound``),
    then ``task_postrun`` whatever the outcome; returns what the body saw when it began."""
    task.push_request(id=f"run-{bound}")
    try:
        task.before_start(f"run-{bound}", (), {})
        seen = dict(log_context.current())
        if bound is not None:
            log_context.bind(fields_of(bound))
        task_postrun.send(sender=task, task_id=f"run-{bound}", task=task, state=state)
    finally:
        task.pop_request()
    return seen


def test_a_run_after_a_retried_command_starts_with_no_command_bound() -> None:
    task = a_task()

    one_run(task, "cmd-retrying", "RETRY")
    seen_by_sweep = one_run(task, None, "SUCCESS")

    assert seen_by_sweep == {}
    assert log_context.current() == {}


def test_each_run_sees_only_itself_and_the_context_is_put_back_after_it() -> None:
    task = a_task()
    log_context.bind(fields_of("outer"))
    try:
        seen = one_run(task, "cmd-b", "FAILURE")

        assert seen == {}
        assert log_context.current()["command_id"] == "outer"
    finally:
        log_context.unbind()


def test_a_token_from_another_context_leaves_nothing_bound() -> None:
    import contextvars

    token = contextvars.copy_context().run(log_context.begin_run)
    log_context.bind(fields_of("stale"))

    log_context.end_run(token)

    assert log_context.current() == {}
