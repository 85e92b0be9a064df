"""``up``'s demo client holds every scope, also when it was made by an earlier ``up``, before
a scope was added."""

from __future__ import annotations

from pathlib import Path

from domain.permissions import ALL_SCOPES, Grant, Scope
from worker.clock import SystemClock
from worker.db.api_clients import create_client, get_client
from worker.db.engine import session_factory
from worker.db.migrate import upgrade
from worker.local.stack import LocalStack, demo_credentials
from worker.settings import Settings


def test_a_demo_client_kept_from_an_earlier_up_gets_the_scopes_added_since(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'billing.db'}")
    upgrade(settings.resolved_database_url())
    sessions = session_factory(settings.resolved_database_url())
    client_id, secret, _ = demo_credentials(settings)
    older = Grant(scopes=ALL_SCOPES - {Scope.WEBHOOKS_MANAGE})
    create_client(sessions, SystemClock(), "demo", grant=older, client_id=client_id, secret=secret)

    seeded = LocalStack(settings)._seed()

    assert seeded == (client_id, secret)
    assert get_client(sessions, client_id).grant.scopes == ALL_SCOPES
