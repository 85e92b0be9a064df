"""Client management on a real database: grants stored and verified, secrets rotated,
clients disabled, and clients from before permissions keeping every scope."""

from __future__ import annotations

import time

import pytest
from alembic import command
from sqlalchemy import text

from adapters.clock import SystemClock
from adapters.db.api_clients import (
    ClientAuthenticator,
    create_client,
    list_clients,
    rotate_secret,
    update_client,
)
from adapters.db.engine import get_engine, session_factory
from adapters.db.migrate import alembic_config, upgrade
from domain.errors import NotFound
from domain.permissions import ALL_SCOPES, DEFAULT_SCOPES, Grant, Scope
from tests.support.stack import eventually

CLOCK = SystemClock()


def test_a_verified_client_comes_with_its_grant(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    grant = Grant(scopes=frozenset({Scope.BILLING_CREATE}), org_ids=frozenset({"org_a"}))
    client = create_client(sessions, CLOCK, "limited", grant=grant)

    assert ClientAuthenticator(sessions, ttl=0).verify(client.client_id, client.secret) == grant


def test_a_client_created_without_scopes_holds_the_defaults(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "least")

    verified = ClientAuthenticator(sessions, ttl=0).verify(client.client_id, client.secret)

    assert verified == Grant(scopes=DEFAULT_SCOPES, org_ids=None)


def test_an_updated_grant_is_what_the_next_verification_sees(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "growing")
    wider = Grant(scopes=frozenset({Scope.SUBSCRIPTIONS_CHANGE, Scope.COMMANDS_READ}))

    shown = update_client(sessions, CLOCK, client.client_id, name="grown", grant=wider)

    assert (shown.name, shown.grant) == ("grown", wider)
    assert shown.updated_at is not None
    assert ClientAuthenticator(sessions, ttl=0).verify(client.client_id, client.secret) == wider
    listed = {view.client_id: view for view in list_clients(sessions)}
    assert listed[client.client_id].to_view()["scopes"] == [
        "commands:read",
        "subscriptions:change",
    ]


def test_a_disabled_client_no_longer_authenticates(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "leaving")

    update_client(sessions, CLOCK, client.client_id, enabled=False)

    assert ClientAuthenticator(sessions, ttl=0).verify(client.client_id, client.secret) is None


def test_a_rotated_secret_replaces_the_old_one(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "rotating")

    rotated = rotate_secret(sessions, CLOCK, client.client_id)

    authenticator = ClientAuthenticator(sessions, ttl=0)
    assert rotated.secret != client.secret
    assert authenticator.verify(client.client_id, rotated.secret) is not None
    assert authenticator.verify(client.client_id, client.secret) is None


def test_a_verification_in_use_is_refreshed_before_it_ends_and_forgotten_once_disabled(
    fresh_database: str,
) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "steady")
    lifetime = 4.0  # half of it leaves the refresh's hash time on a loaded machine
    authenticator = ClientAuthenticator(sessions, ttl=lifetime)
    assert authenticator.verify(client.client_id, client.secret) is not None

    # In use for two lifetimes: never found expired, so never a hash in the request's way.
    until = time.monotonic() + 2 * lifetime
    misses = 0
    while time.monotonic() < until:
        misses += authenticator.cached(client.client_id, client.secret) is None
        time.sleep(0.05)
    assert misses == 0

    update_client(sessions, CLOCK, client.client_id, enabled=False)
    # The next refresh reads the database: the client is no longer trusted.
    eventually(lambda: authenticator.cached(client.client_id, client.secret) is None, lifetime)


def test_changing_an_unknown_client_is_not_found(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    with pytest.raises(NotFound, match="cli_nobody"):
        update_client(sessions, CLOCK, "cli_nobody", enabled=False)
    with pytest.raises(NotFound, match="cli_nobody"):
        rotate_secret(sessions, CLOCK, "cli_nobody")


SCOPES_BEFORE_PERMISSIONS = frozenset(
    {
        Scope.USERS_ENABLE,
        Scope.BILLING_CREATE,
        Scope.BILLING_REGISTER,
        Scope.SUBSCRIPTIONS_CHANGE,
        Scope.COMMANDS_READ,
    }
)


def test_a_client_from_before_permissions_keeps_every_scope(fresh_database: str) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, CLOCK, "old", grant=Grant(scopes=ALL_SCOPES))
    # As it was stored before migration 0006: migrate down and up again around it.
    command.downgrade(alembic_config(fresh_database), "0005")
    with get_engine(fresh_database).begin() as connection:
        columns = connection.execute(text("SELECT * FROM api_clients")).keys()
    assert "scopes" not in columns
    upgrade(fresh_database)

    verified = ClientAuthenticator(sessions, ttl=0).verify(client.client_id, client.secret)

    # Every scope there was then: later scopes (webhooks:manage) are granted explicitly.
    assert verified == Grant(scopes=SCOPES_BEFORE_PERMISSIONS, org_ids=None)
