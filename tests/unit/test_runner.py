"""The task runner (``CommandTask.run_command``), on in-memory ports and without a broker.

Each test delivers a message to a real task the way a worker does: the task of a Celery app
made here (a :class:`CommandApp` carrying the fake application, never connected to a broker)
runs under a request context holding the message's task id, retry count and queue. The
request is marked eager, as ``Task.apply`` marks it, so that a retry is raised as
:class:`celery.exceptions.Retry` (its countdown in ``when``) instead of being sent.
"""

from __future__ import annotations

import json
import pickle
import traceback
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from billiard.einfo import ExceptionInfo
from celery import Task
from celery.exceptions import Retry

import tasks.billing
import tasks.subscriptions
import tasks.users
from adapters.observability.metrics import retry_reason
from application.command_outcomes import Delivery, DeliveryOutcome, Succeeded
from application.command_runner import run_command
from application.handlers.users import enable_user
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.accounts import BillingAccountState
from domain.errors import ErrorCode, InvalidArgument, TransientError
from domain.messages import CommandStatus
from domain.users import EnableUser, UserState
from tasks.base import RESUMES_HEADER, CommandFailed, CommandRejected
from tasks.runtime import CommandApp
from tests.support.fakes.application import DEFAULT_RUNNER_POLICY, FakeApplication
from tests.support.fakes.data import a_user, an_organization
from tests.support.fakes.database import DatabaseUnavailable

# The task modules register their tasks with every Celery app, this one included.
TASK_MODULES = (tasks.billing, tasks.subscriptions, tasks.users)
ENABLE = EnableUser.TASK_NAME
CREATE = CreateBillingAccount.TASK_NAME


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    app.db.seed(a_user("usr_1"), an_organization("org_1"))
    return app


def deliver(
    worker: CommandApp,
    task_name: str,
    *args: Any,
    task_id: str = "task-1",
    retries: int = 0,
    queue: str = "users",
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run the task on one delivery of a message, as the worker runs it; a message's own
    ``headers`` are attributes of the request, as Celery's worker hands them."""
    task: Task[Any, Any] = worker.tasks[task_name]
    task.push_request(
        id=task_id,
        args=args,
        kwargs=kwargs,
        retries=retries,
        delivery_info={"routing_key": queue},
        is_eager=True,
        called_directly=False,
        **(headers or {}),
    )
    try:
        result: dict[str, Any] = task.run(*args, **kwargs)
        return result
    finally:
        task.pop_request()


def enable(worker: CommandApp, command_id: str = "c1", **options: Any) -> dict[str, Any]:
    return deliver(worker, ENABLE, command_id=command_id, user_id="usr_1", **options)


def create_account(
    worker: CommandApp, retries: int = 0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return deliver(
        worker,
        CREATE,
        command_id="c-create",
        org_id="org_1",
        billing_account_id="ba_1",
        account={"name": "Acme", "email": "billing@acme.example"},
        retries=retries,
        queue="billing",
        headers=headers,
    )


def headers_of(retry: Retry) -> dict[str, str]:
    """The headers the retry's message is sent with."""
    signature: Any = getattr(retry, "sig", None)  # the stubs lack it
    assert signature is not None
    return dict(signature.options.get("headers") or {})


def reason_of(error: dict[str, Any]) -> str:
    infos = [detail for detail in error["details"] if "reason" in detail]
    return str(infos[-1]["reason"])


def countdown(retry: Retry) -> float:
    """The seconds a retry is sent back to the queue for."""
    when = retry.when
    assert when is not None
    assert not isinstance(when, datetime)  # a countdown, not an eta
    return float(when)


def unavailable(retry_after: float | None = None) -> TransientError:
    return TransientError("stripe create customer: 503", retry_after=retry_after)


# --- success and replay -----------------------------------------------------------------------


def test_a_command_runs_its_handler_and_its_result_is_recorded(
    worker: CommandApp, app: FakeApplication
) -> None:
    result = enable(worker)

    assert result == {"user_id": "usr_1", "was_already_enabled": False}
    entry = app.commands["c1"]
    assert (entry.status, entry.attempts, entry.source) == (CommandStatus.SUCCEEDED, 1, "queue")
    assert entry.result == result
    assert entry.payload == {"command_id": "c1", "user_id": "usr_1"}
    assert app.db.row("users", "usr_1").state is UserState.ENABLED


def test_a_command_without_an_id_is_recorded_under_its_task_id(
    worker: CommandApp, app: FakeApplication
) -> None:
    deliver(worker, ENABLE, task_id="task-42", user_id="usr_1")

    assert app.commands["task-42"].status is CommandStatus.SUCCEEDED


def test_a_finished_command_delivered_again_replays_its_outcome_without_running(
    worker: CommandApp, app: FakeApplication
) -> None:
    first = create_account(worker)
    finished_at = app.commands["c-create"].finished_at
    app.clock.advance(timedelta(minutes=1))

    again = create_account(worker)

    assert again == first
    assert len(app.provider.calls) == 1
    entry = app.commands["c-create"]
    assert (entry.attempts, entry.finished_at) == (1, finished_at)  # nothing ran again


def test_a_rejected_command_delivered_again_is_rejected_again_with_its_recorded_error(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as first:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")
    app.db.seed(a_user("usr_missing"))  # the user exists now: the outcome stands

    with pytest.raises(CommandRejected) as again:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")

    assert again.value.error == first.value.error
    assert again.value.error["code"] == ErrorCode.NOT_FOUND
    assert app.db.row("users", "usr_missing").state is UserState.DISABLED


# --- failures that end the command ------------------------------------------------------------


def test_a_callers_mistake_rejects_the_command_at_once_without_a_retry(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as rejected:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")

    entry = app.commands["c1"]
    assert rejected.value.error["code"] == ErrorCode.NOT_FOUND
    assert (entry.status, entry.error, entry.retries) == (
        CommandStatus.REJECTED,
        rejected.value.error,
        [],
    )


def test_an_invalid_message_is_rejected_naming_the_field(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as rejected:
        deliver(worker, ENABLE, command_id="c1", user_id="not a valid id")

    violations = rejected.value.error["details"][0]["fieldViolations"]
    assert rejected.value.error["code"] == ErrorCode.INVALID_ARGUMENT
    assert [violation["field"] for violation in violations] == ["user_id"]
    assert app.commands["c1"].status is CommandStatus.REJECTED


def test_positional_arguments_are_refused(worker: CommandApp, app: FakeApplication) -> None:
    with pytest.raises(CommandRejected) as rejected:
        deliver(worker, ENABLE, "usr_1", command_id="c1")

    assert rejected.value.error["details"][0]["fieldViolations"][0]["field"] == "args"
    assert app.db.row("users", "usr_1").state is UserState.DISABLED


def test_values_no_database_keeps_are_journalled_escaped_and_reject_the_command(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as failed:
        deliver(worker, ENABLE, command_id="c1", user_id="usr\x001")

    entry = app.commands["c1"]
    assert entry.status is CommandStatus.REJECTED
    assert entry.payload["user_id"] == "usr\\u00001"
    assert failed.value.error["details"][0]["fieldViolations"][0]["field"] == "user_id"


def test_an_unexpected_exception_is_recorded_as_internal_without_a_retry(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.db.fail_next_commits(1, RuntimeError("a bug"))

    with pytest.raises(CommandFailed) as failed:
        enable(worker)

    assert failed.value.error["code"] == ErrorCode.INTERNAL
    assert failed.value.error["details"][0]["metadata"] == {"exception": "RuntimeError"}
    assert app.commands["c1"].status is CommandStatus.FAILED


# --- the retry budget -------------------------------------------------------------------------


def test_transient_failures_are_retried_with_doubling_backoff_until_the_command_succeeds(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next("create_customer", unavailable(), times=3)
    for retries in range(3):
        with pytest.raises(Retry) as retry:
            create_account(worker, retries=retries)
        ceiling = 0.2 * 2**retries  # base 0.2 s, doubling
        assert 0 <= countdown(retry.value) <= ceiling
        assert app.commands["c-create"].status is CommandStatus.RETRYING

    result = create_account(worker, retries=3)

    entry = app.commands["c-create"]
    assert result["billing_account"]["state"] == "active"
    assert entry.status is CommandStatus.SUCCEEDED
    assert [retry["backoff_ceiling_seconds"] for retry in entry.retries] == [0.2, 0.4, 0.8]
    assert [retry["attempt"] for retry in entry.retries] == [1, 2, 3]
    assert len({call.idempotency_key for call in app.provider.calls}) == 1


def test_a_retry_waits_at_least_what_the_provider_asked_for(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next("create_customer", unavailable(retry_after=3.0))

    with pytest.raises(Retry) as retry:
        create_account(worker)

    assert 3.0 <= countdown(retry.value) <= 5.0  # the hint, within the longest delay
    [recorded] = app.commands["c-create"].retries
    assert recorded["retry_after_seconds"] == 3.0


def test_a_command_out_of_retries_fails_unavailable_and_its_account_stays_pending(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next("create_customer", unavailable(), times=4)
    for retries in range(3):
        with pytest.raises(Retry):
            create_account(worker, retries=retries)

    with pytest.raises(CommandFailed) as failed:
        create_account(worker, retries=3)

    error = failed.value.error
    assert error["code"] == ErrorCode.UNAVAILABLE
    assert reason_of(error) == "RETRY_BUDGET_EXHAUSTED"
    assert error["details"][0]["metadata"] == {"attempts": "4"}
    entry = app.commands["c-create"]
    assert (entry.status, entry.attempts) == (CommandStatus.FAILED, 4)
    assert app.db.row("billing_accounts", "ba_1").state is BillingAccountState.PENDING


def test_a_transient_database_error_is_retried_like_a_provider_hiccup(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.db.fail_next_commits(1)

    with pytest.raises(Retry):
        enable(worker)
    result = enable(worker, retries=1)

    assert result["was_already_enabled"] is False
    [retry] = app.commands["c1"].retries
    assert retry["reason"] == "database: database is locked"


def test_a_retry_is_raised_in_the_context_of_the_failure_it_retries_so_its_metric_names_why(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next("create_customer", unavailable())
    with pytest.raises(Retry) as provider_retry:
        create_account(worker)
    app.db.fail_next_commits(1)
    with pytest.raises(Retry) as database_retry:
        enable(worker)
    app.commands.begin("c2", ENABLE, {"command_id": "c2", "user_id": "usr_1"}, source="api")
    with pytest.raises(Retry) as duplicate_retry:
        enable(worker, "c2")

    def reason(retry: Retry) -> str:
        return retry_reason(retry, is_database_error=app.is_transient)

    assert isinstance(provider_retry.value.__context__, TransientError)
    assert reason(provider_retry.value) == "conflict"  # a TransientError not from the SDK
    assert reason(database_retry.value) == "database"
    assert reason(duplicate_retry.value) == "in_progress"


# --- duplicates and reused ids ----------------------------------------------------------------


def test_a_duplicate_delivered_while_the_command_runs_waits_without_running(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.begin("c1", ENABLE, {"command_id": "c1", "user_id": "usr_1"}, source="api")

    with pytest.raises(Retry) as retry:
        enable(worker)

    assert countdown(retry.value) >= 0
    assert app.db.row("users", "usr_1").state is UserState.DISABLED
    assert app.commands["c1"].status is CommandStatus.RUNNING


def test_a_command_whose_running_delivery_died_runs_once_its_lease_is_over(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.begin("c1", ENABLE, {"command_id": "c1", "user_id": "usr_1"}, source="api")
    app.clock.advance(timedelta(minutes=11))

    enable(worker)

    entry = app.commands["c1"]
    assert (entry.status, entry.attempts) == (CommandStatus.SUCCEEDED, 2)


def test_a_command_id_reused_for_another_command_is_refused_and_the_first_stands(
    worker: CommandApp, app: FakeApplication
) -> None:
    enable(worker, "c1")

    with pytest.raises(CommandRejected) as refused:
        deliver(
            worker,
            CREATE,
            task_id="task-2",
            queue="billing",
            command_id="c1",
            org_id="org_1",
            account={"name": "Acme", "email": "billing@acme.example"},
        )

    error = refused.value.error
    assert error["code"] == ErrorCode.INVALID_ARGUMENT
    assert reason_of(error) == "COMMAND_ID_REUSED"
    assert error["details"][1]["metadata"]["recorded_type"] == ENABLE
    entry = app.commands["c1"]
    assert (entry.type, entry.status) == (ENABLE, CommandStatus.SUCCEEDED)
    [letter] = app.dead.letters
    assert (letter.queue, letter.task, letter.task_id) == ("billing", CREATE, "task-2")
    assert letter.reason.startswith("COMMAND_ID_REUSED")
    assert app.db.rows("billing_accounts") == []


def test_a_command_id_reused_with_another_payload_of_the_same_task_is_refused(
    worker: CommandApp, app: FakeApplication
) -> None:
    enable(worker, "c1")
    app.db.seed(a_user("usr_2"))

    with pytest.raises(CommandRejected) as refused:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_2")

    assert reason_of(refused.value.error) == "COMMAND_ID_REUSED"
    assert app.db.row("users", "usr_2").state is UserState.DISABLED


def test_a_reused_id_is_refused_even_when_its_dead_letter_cannot_be_kept(
    worker: CommandApp, app: FakeApplication
) -> None:
    enable(worker, "c1")
    app.dead.fail_next(ConnectionError("redis is down"))
    app.db.seed(a_user("usr_2"))

    with pytest.raises(CommandRejected) as refused:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_2")

    assert reason_of(refused.value.error) == "COMMAND_ID_REUSED"
    assert app.dead.letters == []


# --- the journal failing ----------------------------------------------------------------------


def test_an_unreachable_journal_at_the_start_keeps_the_message_for_a_retry(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("begin", DatabaseUnavailable("connection refused"))

    with pytest.raises(Retry):
        enable(worker)

    assert app.commands.entries == {}
    assert app.db.row("users", "usr_1").state is UserState.DISABLED


def test_a_start_whose_answer_was_lost_is_taken_over_by_the_next_delivery_not_after_the_lease(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.lose_next_answer("begin", DatabaseUnavailable("server closed the connection"))

    with pytest.raises(Retry) as retry:
        create_account(worker)

    # The start went through unanswered: the command is running as of this delivery, and
    # its retry carries that run's mark.
    assert app.commands["c-create"].status is CommandStatus.RUNNING
    assert headers_of(retry.value) == {
        RESUMES_HEADER: app.commands["c-create"].updated_at.isoformat()
    }
    result = create_account(worker, retries=1, headers=headers_of(retry.value))

    assert result["billing_account"]["state"] == "active"
    assert app.commands.entries["c-create"].status is CommandStatus.SUCCEEDED
    assert len(app.provider.calls_of("create_customer")) == 1


def test_a_journal_that_breaks_at_the_start_for_another_reason_raises_it(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("begin", RuntimeError("schema mismatch"))

    with pytest.raises(RuntimeError, match="schema mismatch"):
        enable(worker)


def test_a_rejection_that_cannot_be_recorded_is_retried_rather_than_lost(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("reject", DatabaseUnavailable("connection lost"))

    with pytest.raises(Retry):
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")
    app.clock.advance(timedelta(minutes=11))  # the first delivery's lease is over
    with pytest.raises(CommandRejected):
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing", retries=1)

    assert app.commands["c1"].status is CommandStatus.REJECTED


def test_a_success_that_cannot_be_recorded_is_run_again_and_recorded_without_a_second_effect(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("succeed", DatabaseUnavailable("connection lost"))

    with pytest.raises(Retry):
        create_account(worker)
    app.clock.advance(timedelta(minutes=11))  # the first delivery's lease is over
    again = create_account(worker, retries=1)

    assert app.commands["c-create"].status is CommandStatus.SUCCEEDED
    assert again["billing_account"]["state"] == "active"
    assert len(app.provider.calls_of("create_customer")) == 1


def test_a_rejection_record_that_breaks_for_another_reason_raises_it(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("reject", RuntimeError("schema mismatch"))

    with pytest.raises(RuntimeError, match="schema mismatch"):
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")


def test_a_retry_that_cannot_be_recorded_still_happens_and_takes_over_the_run_at_once(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next("create_customer", unavailable())
    app.commands.fail_next("retrying", DatabaseUnavailable("connection lost"))

    with pytest.raises(Retry) as retry:
        create_account(worker)

    # Unrecorded, the command is left running; the retry's message carries the run's mark,
    # and its delivery takes that run over without waiting for the running lease.
    assert app.commands["c-create"].status is CommandStatus.RUNNING
    assert headers_of(retry.value) == {
        RESUMES_HEADER: app.commands["c-create"].updated_at.isoformat()
    }
    result = create_account(worker, retries=1, headers=headers_of(retry.value))

    assert result["billing_account"]["state"] == "active"
    assert app.commands.entries["c-create"].status is CommandStatus.SUCCEEDED
    assert len({call.idempotency_key for call in app.provider.calls}) == 1


def test_a_success_that_cannot_be_recorded_is_recorded_by_the_next_delivery_at_once(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("succeed", DatabaseUnavailable("connection lost"))

    with pytest.raises(Retry) as retry:
        create_account(worker)
    again = create_account(worker, retries=1, headers=headers_of(retry.value))

    assert again["billing_account"]["state"] == "active"
    assert app.commands["c-create"].status is CommandStatus.SUCCEEDED
    assert len(app.provider.calls_of("create_customer")) == 1


def test_a_duplicate_message_without_the_runs_mark_still_waits_for_the_running_delivery(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.commands.fail_next("retrying", DatabaseUnavailable("connection lost"))
    app.provider.fail_next("create_customer", unavailable())
    with pytest.raises(Retry):
        create_account(worker)
    stale = {RESUMES_HEADER: (app.clock.now() - timedelta(seconds=1)).isoformat()}

    # Another delivery of the command (no mark, or another run's) is told it runs elsewhere,
    # and its own retry carries no mark.
    for headers in (None, stale):
        with pytest.raises(Retry) as waiting:
            create_account(worker, retries=0, headers=headers)
        assert RESUMES_HEADER not in headers_of(waiting.value)
        assert app.commands["c-create"].status is CommandStatus.RUNNING
    assert len(app.provider.calls_of("create_customer")) == 1


# --- what Celery shows of a command -----------------------------------------------------------


def test_the_task_returns_the_result_masked_while_the_command_log_keeps_it_whole(
    worker: CommandApp, app: FakeApplication
) -> None:
    shown = create_account(worker)

    assert shown["billing_account"]["email"] == "b***@acme.example"
    assert shown["billing_account"]["name"] == "A***"
    recorded = app.commands["c-create"].result
    assert recorded is not None
    assert recorded["billing_account"]["email"] == "billing@acme.example"
    assert create_account(worker) == shown  # a replay shows the same


def test_a_rejected_command_s_message_is_masked_and_its_error_whole(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next(
        "create_customer",
        InvalidArgument.for_fields(
            "the billing provider rejected the request: Invalid email billing@acme.example",
            [("account.email", "Invalid email billing@acme.example")],
        ),
    )

    with pytest.raises(CommandRejected) as failed:
        create_account(worker)

    assert "billing@acme.example" not in str(failed.value)
    assert "b***@acme.example" in str(failed.value)
    shown_traceback = "".join(traceback.format_exception(failed.value))
    assert "billing@acme.example" not in shown_traceback
    assert "billing@acme.example" not in repr(failed.value)
    assert "billing@acme.example" in failed.value.error["message"]


def test_a_rejection_shows_as_one_readable_line_with_its_code_reason_message_and_field(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.provider.fail_next(
        "create_customer",
        InvalidArgument.for_fields(
            "the billing provider rejected the request: Invalid email",
            [("account.email", "Invalid email")],
        ),
    )

    with pytest.raises(CommandRejected) as rejected:
        create_account(worker)

    assert repr(rejected.value) == (
        "CommandRejected(INVALID_ARGUMENT (3): the billing provider rejected the request: "
        "Invalid email; account.email: Invalid email)"
    )


def test_what_the_result_backend_keeps_of_a_rejection_is_its_masked_error_body_as_json(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as rejected:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")

    # A queue publisher reads the exception's arguments (Celery's JSON result backend).
    (shown,) = rejected.value.args
    assert json.loads(shown) == app.commands["c1"].error


def test_a_rejection_crosses_between_processes_whole_as_celery_pickles_it(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(CommandRejected) as rejected:
        deliver(worker, ENABLE, command_id="c1", user_id="usr_missing")

    crossed = pickle.loads(pickle.dumps(rejected.value))  # noqa: S301 - our own bytes, as Celery does

    assert type(crossed) is CommandRejected
    assert crossed.args == rejected.value.args
    assert crossed.error == rejected.value.error
    assert repr(crossed) == repr(rejected.value)
    assert repr(crossed).startswith("CommandRejected(NOT_FOUND (5): user 'usr_missing' not found")


def test_a_failure_the_runner_decided_hands_no_traceback_to_the_task_failed_event(
    worker: CommandApp, app: FakeApplication
) -> None:
    task: Task[Any, Any] = worker.tasks[ENABLE]
    for ended in (
        CommandRejected.of({"code": 5, "message": "user 'u' not found", "details": []}),
        CommandFailed.of({"code": 14, "message": "gave up after 4 attempts", "details": []}),
    ):
        try:
            raise ended
        except CommandFailed:
            einfo = ExceptionInfo()
        assert einfo.traceback  # what Celery formatted from the runner's frames

        task.on_failure(ended, "task-1", (), {}, einfo)

        assert einfo.traceback is None


def test_with_masking_off_the_task_returns_the_whole_result() -> None:
    app = FakeApplication(policy=replace(DEFAULT_RUNNER_POLICY, mask_personal_data=False))
    app.db.seed(an_organization("org_1"))
    celery = CommandApp("unit-tests", application=lambda: app, set_as_current=False)
    try:
        shown = create_account(celery)
    finally:
        celery.close()

    assert shown["billing_account"]["email"] == "billing@acme.example"


# --- the relay it asks for ----------------------------------------------------------------------


def test_a_command_asks_for_a_relay_when_it_wrote_events_and_for_none_when_it_wrote_none(
    app: FakeApplication,
) -> None:
    def delivered(command_id: str) -> DeliveryOutcome:
        delivery = Delivery(
            ENABLE,
            f"task-{command_id}",
            0,
            "users",
            (),
            {"command_id": command_id, "user_id": "usr_1"},
        )
        return run_command(app, EnableUser, enable_user, delivery)

    enabled = delivered("c1")
    replayed = delivered("c1")
    already_enabled = delivered("c2")

    assert isinstance(enabled, Succeeded)
    assert enabled.relay  # user.enabled was written
    assert isinstance(replayed, Succeeded)
    assert not replayed.relay
    assert isinstance(already_enabled, Succeeded)
    assert not already_enabled.relay
    assert [event.type for event in app.db.unit_of_work().events.unpublished(10)] == [
        "user.enabled"
    ]
