"""``up``'s demo client holds every scope, also when it was made by an earlier ``up``, before
a scope was added; and the secret ``up`` prints is always the one that authenticates."""

from __future__ import annotations

from pathlib import Path

from adapters.clock import SystemClock
from adapters.db.api_clients import (
    create_client,
    get_client,
    rotate_secret,
    secret_authenticates,
    update_client,
)
from adapters.db.engine import session_factory
from adapters.db.migrate import upgrade
from domain.permissions import ALL_SCOPES, Grant, Scope
from worker.bootstrap import build_services
from worker.local.seed import (
    DEMO_CLIENT_ID,
    DemoCredentials,
    saved_demo_credentials,
    seed_demo_client,
)
from worker.settings import Settings


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'billing.db'}")
    upgrade(settings.resolved_database_url())
    return settings


def _seed(settings: Settings) -> DemoCredentials:
    return seed_demo_client(settings, build_services(settings, clock=SystemClock()))


def test_a_demo_client_kept_from_an_earlier_up_gets_the_scopes_added_since(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    sessions = session_factory(settings.resolved_database_url())
    first = _seed(settings)
    older = Grant(scopes=ALL_SCOPES - {Scope.WEBHOOKS_MANAGE})
    update_client(sessions, SystemClock(), first.client_id, grant=older)

    again = _seed(settings)

    assert again == first
    assert get_client(sessions, first.client_id).grant.scopes == ALL_SCOPES


def test_after_the_demo_secret_is_rotated_up_prints_a_new_secret_that_authenticates(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    sessions = session_factory(settings.resolved_database_url())
    printed_before = _seed(settings)
    rotated = rotate_secret(sessions, SystemClock(), DEMO_CLIENT_ID)

    printed = _seed(settings)

    assert secret_authenticates(sessions, DEMO_CLIENT_ID, printed.client_secret)
    # Neither the withdrawn secret nor the one the operator was given is printed again.
    assert printed.client_secret not in (printed_before.client_secret, rotated.secret)
    assert not secret_authenticates(sessions, DEMO_CLIENT_ID, printed_before.client_secret)
    assert saved_demo_credentials(settings) == printed


def test_a_demo_client_without_its_kept_secret_is_given_one_and_enabled_again(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    sessions = session_factory(settings.resolved_database_url())
    create_client(sessions, SystemClock(), "demo", client_id=DEMO_CLIENT_ID, secret="s" * 32)
    update_client(sessions, SystemClock(), DEMO_CLIENT_ID, enabled=False)

    printed = _seed(settings)

    assert secret_authenticates(sessions, DEMO_CLIENT_ID, printed.client_secret)
    assert get_client(sessions, DEMO_CLIENT_ID).enabled
    assert (tmp_path / "demo-client.json").stat().st_mode & 0o777 == 0o600
