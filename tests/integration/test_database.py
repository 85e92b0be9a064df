"""Migrations, the command log and client authentication against SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import update

from adapters.clock import SystemClock
from adapters.db.api_clients import ClientAuthenticator, create_client
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import get_engine, session_factory
from adapters.db.migrate import upgrade
from adapters.db.models import ApiClientRow, Base, CommandRow
from domain.errors import CommandIdReused, CommandInProgress
from domain.messages import CommandStatus
from domain.ports.commands import DuplicateCommand


def test_migrations_build_exactly_the_models_schema(fresh_database: str) -> None:
    with get_engine(fresh_database).connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_migrating_twice_is_harmless(fresh_database: str) -> None:
    upgrade(fresh_database)


def command_log(url: str) -> SqlCommandLog:
    return SqlCommandLog(session_factory(url), SystemClock())


PAYLOAD = {"user_id": "u"}


def accept(log: SqlCommandLog, key: str | None = None, client: str = "cli_1") -> str:
    command_id = str(uuid.uuid4())
    log.accept(
        command_id=command_id,
        command_type="users.enable",
        payload=PAYLOAD,
        client_id=client,
        idempotency_key=key,
        request_fingerprint="f",
    )
    return command_id


def test_a_command_runs_from_queued_to_succeeded(fresh_database: str) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    assert log.begin(command_id, "users.enable", PAYLOAD, source="queue") is None
    log.succeed(command_id, {"ok": True})
    record = log.get(command_id)
    assert record is not None
    assert (record.status, record.attempts, record.result, record.source) == (
        CommandStatus.SUCCEEDED,
        1,
        {"ok": True},
        "api",
    )
    assert record.finished_at is not None


def test_a_finished_command_is_not_begun_again(fresh_database: str) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    log.begin(command_id, "users.enable", PAYLOAD, source="queue")
    log.fail(command_id, {"code": 5, "message": "gone", "details": []})
    finished = log.begin(command_id, "users.enable", PAYLOAD, source="queue")
    assert finished is not None
    assert finished.status is CommandStatus.FAILED
    assert finished.attempts == 1


def test_a_second_delivery_of_a_running_command_is_told_to_wait(fresh_database: str) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    log.begin(command_id, "users.enable", PAYLOAD, source="queue")

    with pytest.raises(CommandInProgress):
        log.begin(command_id, "users.enable", PAYLOAD, source="queue")
    record = log.get(command_id)
    assert record is not None
    assert record.attempts == 1


def test_a_running_command_whose_lease_ran_out_is_begun_again(fresh_database: str) -> None:
    log = SqlCommandLog(session_factory(fresh_database), SystemClock(), timedelta(seconds=0))
    command_id = accept(log)
    log.begin(command_id, "users.enable", PAYLOAD, source="queue")

    assert log.begin(command_id, "users.enable", PAYLOAD, source="queue") is None
    record = log.get(command_id)
    assert record is not None
    assert record.attempts == 2


def test_a_command_published_by_another_service_is_logged_on_first_delivery(
    fresh_database: str,
) -> None:
    log = command_log(fresh_database)
    command_id = str(uuid.uuid4())
    assert log.begin(command_id, "users.enable", PAYLOAD, source="queue") is None
    record = log.get(command_id)
    assert record is not None
    assert (record.source, record.status, record.attempts) == ("queue", CommandStatus.RUNNING, 1)


def test_an_idempotency_key_is_unique_per_client(fresh_database: str) -> None:
    log = command_log(fresh_database)
    key = uuid.uuid4().hex
    accept(log, key, client="cli_a")
    accept(log, key, client="cli_b")
    with pytest.raises(DuplicateCommand) as duplicate:
        accept(log, key, client="cli_a")
    assert duplicate.value.idempotency_key == key


def test_a_request_that_loses_the_race_for_its_key_gets_the_domain_error_and_records_nothing(
    fresh_database: str,
) -> None:
    log = command_log(fresh_database)
    key = uuid.uuid4().hex
    winner = accept(log, key)
    loser = str(uuid.uuid4())

    with pytest.raises(DuplicateCommand):
        log.accept(
            command_id=loser,
            command_type="users.enable",
            payload=PAYLOAD,
            client_id="cli_1",
            idempotency_key=key,
            request_fingerprint="f",
        )

    found = log.find_by_idempotency_key("cli_1", key)
    assert found is not None
    assert (found.id, log.get(loser)) == (winner, None)


def test_a_command_id_accepted_twice_is_a_duplicate_command(fresh_database: str) -> None:
    # Two deliveries of one Stripe event race to record the same sync (its id is derived).
    log = command_log(fresh_database)
    command_id = str(uuid.uuid4())

    def record() -> None:
        log.accept(
            command_id=command_id,
            command_type="users.enable",
            payload=PAYLOAD,
            client_id=None,
            idempotency_key=None,
            request_fingerprint=None,
        )

    record()
    with pytest.raises(DuplicateCommand) as duplicate:
        record()

    assert (duplicate.value.command_id, duplicate.value.idempotency_key) == (command_id, None)


def test_a_command_accepted_long_ago_and_never_started_is_stalled_until_published_again(
    fresh_database: str,
) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    assert command_id not in [r.id for r in log.stalled(timedelta(seconds=60))]
    an_hour_ago = SystemClock().now() - timedelta(hours=1)
    with session_factory(fresh_database).begin() as session:
        session.execute(
            update(CommandRow)
            .where(CommandRow.id == command_id)
            .values(created_at=an_hour_ago, published_at=an_hour_ago)
        )
    assert command_id in [r.id for r in log.stalled(timedelta(seconds=60), limit=10_000)]
    log.mark_published(command_id)
    assert command_id not in [r.id for r in log.stalled(timedelta(seconds=60), limit=10_000)]


def test_a_replayed_command_is_queued_again_without_its_old_outcome(fresh_database: str) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    log.begin(command_id, "users.enable", PAYLOAD, source="queue")
    log.fail(command_id, {"code": 14, "message": "down", "details": []})
    record = log.requeue(command_id)
    assert record is not None
    assert (record.status, record.error, record.finished_at) == (CommandStatus.QUEUED, None, None)


def test_a_client_authenticates_with_its_secret_only(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, SystemClock(), "t")
    authenticator = ClientAuthenticator(sessions, ttl=60)
    assert authenticator.verify(client.client_id, client.secret)
    assert not authenticator.verify(client.client_id, client.secret + "x")
    assert not authenticator.verify("cli_unknown", client.secret)


def test_a_verified_secret_is_trusted_from_cache_until_the_ttl_ends(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, SystemClock(), "t")
    cached = ClientAuthenticator(sessions, ttl=60)
    uncached = ClientAuthenticator(sessions, ttl=0)
    assert cached.verify(client.client_id, client.secret)
    assert uncached.verify(client.client_id, client.secret)
    with sessions.begin() as session:
        session.execute(
            update(ApiClientRow).where(ApiClientRow.id == client.client_id).values(enabled=False)
        )
    # The cache answers without the database (and without the slow hash) within its TTL...
    assert cached.verify(client.client_id, client.secret)
    # ...while a verification that reaches the database sees the client disabled.
    assert not uncached.verify(client.client_id, client.secret)


@pytest.mark.parametrize(
    ("command_type", "payload"),
    [("users.enable", {"user_id": "another"}), ("billing.register_account", PAYLOAD)],
    ids=["another-payload", "another-type"],
)
def test_a_command_id_of_another_command_is_refused_and_its_record_kept(
    fresh_database: str, command_type: str, payload: dict[str, str]
) -> None:
    log = command_log(fresh_database)
    command_id = accept(log)
    log.begin(command_id, "users.enable", PAYLOAD, source="queue")
    log.succeed(command_id, {"ok": True})

    with pytest.raises(CommandIdReused):
        log.begin(command_id, command_type, payload, source="queue")

    record = log.get(command_id)
    assert record is not None
    assert (record.status, record.result) == (CommandStatus.SUCCEEDED, {"ok": True})
