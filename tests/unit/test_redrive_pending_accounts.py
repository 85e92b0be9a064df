"""Beat's re-drive of accounts stuck ``pending`` (``application/handlers/operations/sweeps.py``),
on in-memory ports: one registration command per account and period, collapsing duplicates."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.handlers.billing.accounts import register_billing_account
from application.handlers.operations.sweeps import BULK_MESSAGE_PRIORITY, redrive_pending_accounts
from application.requests.sweeps import RedrivePendingAccounts
from domain.billing.account_commands import RegisterBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.registration_redrive import redrive_registration
from tests.support.environment import clear_settings
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.clock import T0
from tests.support.fakes.data import an_organization

AFTER = timedelta(seconds=900)  # the runner policy's default


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    app.db.seed(an_organization("org_1"))
    return app


def opened(app: FakeApplication, account_id: str = "ba_1", *, offline: bool = False) -> None:
    account = BillingAccount.open(
        account_id,
        an_organization("org_1"),
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=offline,
        default_currency="usd",
        now=app.clock.now(),
    )
    app.db.seed(account)


def published_ids(app: FakeApplication) -> list[str]:
    return [message.command_id for message in app.published.published]


def test_an_account_pending_past_the_threshold_has_its_registration_sent_again(
    app: FakeApplication,
) -> None:
    opened(app)
    app.clock.advance(AFTER)

    assert redrive_pending_accounts(RedrivePendingAccounts(), app) == 1

    [message] = app.published.published
    assert (message.task_name, message.queue, message.priority) == (
        RegisterBillingAccount.TASK_NAME,
        "billing",
        BULK_MESSAGE_PRIORITY,
    )
    assert message.command_id == "redrive:ba_1:1"
    assert message.payload == {
        "version": 1,
        "command_id": "redrive:ba_1:1",
        "org_id": "org_1",
        "billing_account_id": "ba_1",
    }


def test_younger_registered_and_offline_accounts_are_left_alone(app: FakeApplication) -> None:
    opened(app, "ba_offline", offline=True)
    opened(app, "ba_registered")
    registered = app.db.row("billing_accounts", "ba_registered")
    registered.registered("fake", "cus_1", T0)
    app.db.seed(registered)
    app.clock.advance(AFTER)
    opened(app, "ba_young")
    app.clock.advance(AFTER - timedelta(seconds=1))

    assert redrive_pending_accounts(RedrivePendingAccounts(), app) == 0
    assert app.published.published == []


def test_sweeps_within_one_period_send_the_same_command_and_the_next_period_the_next(
    app: FakeApplication,
) -> None:
    opened(app)
    app.clock.advance(AFTER + timedelta(seconds=10))
    redrive_pending_accounts(RedrivePendingAccounts(), app)
    app.clock.advance(timedelta(seconds=300))
    redrive_pending_accounts(RedrivePendingAccounts(), app)
    app.clock.advance(AFTER)
    redrive_pending_accounts(RedrivePendingAccounts(), app)

    assert published_ids(app) == ["redrive:ba_1:1", "redrive:ba_1:1", "redrive:ba_1:2"]


def test_the_command_sent_again_registers_the_account_once(app: FakeApplication) -> None:
    opened(app)
    app.clock.advance(AFTER)
    redrive_pending_accounts(RedrivePendingAccounts(), app)
    [message] = app.published.published

    command = RegisterBillingAccount.model_validate(message.payload)
    register_billing_account(command, app)
    register_billing_account(command, app)  # a duplicate of the same attempt

    account = app.db.row("billing_accounts", "ba_1")
    assert account.state is BillingAccountState.ACTIVE
    assert len(app.provider.customers) == 1
    app.clock.advance(AFTER)
    assert redrive_pending_accounts(RedrivePendingAccounts(), app) == 0


def test_an_account_whose_publish_fails_is_sent_by_the_next_sweep_and_the_others_go_now(
    app: FakeApplication,
) -> None:
    opened(app, "ba_1")
    app.clock.advance(timedelta(seconds=1))
    opened(app, "ba_2")
    app.clock.advance(AFTER)
    app.published.fail_next(ConnectionError("redis is down"))

    assert redrive_pending_accounts(RedrivePendingAccounts(), app) == 1
    assert published_ids(app) == ["redrive:ba_2:1"]
    assert redrive_pending_accounts(RedrivePendingAccounts(), app) == 2


def test_the_command_id_of_a_long_account_id_fits_and_stays_the_same() -> None:
    account = BillingAccount.open(
        "ba_" + "x" * 120,
        an_organization("org_1"),
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=False,
        default_currency="usd",
        now=T0,
    )

    first = redrive_registration(account, T0 + 3 * AFTER, AFTER)
    again = redrive_registration(account, T0 + 3 * AFTER + timedelta(seconds=5), AFTER)

    assert first is not None
    assert again is not None
    assert first.command_id == again.command_id
    assert len(first.command_id) <= 64
    assert first.command_id.startswith("redrive:")
    assert first.command_id.endswith(":3")


def test_beat_redrives_pending_accounts_on_the_maintenance_queue_at_its_own_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.messaging.config import REDRIVE_PENDING_ACCOUNTS, celery_config
    from worker.bootstrap import build_services
    from worker.celery_app import create_celery_app
    from worker.settings import Settings

    clear_settings(monkeypatch)
    settings = Settings(redis_url="redis://127.0.0.1:1/0")
    sweep = celery_config(settings)["beat_schedule"]["redrive-pending-accounts"]
    app = create_celery_app(settings)

    assert REDRIVE_PENDING_ACCOUNTS == "billing.redrive_pending_accounts"
    assert (sweep["task"], sweep["schedule"]) == (REDRIVE_PENDING_ACCOUNTS, 300.0)
    assert REDRIVE_PENDING_ACCOUNTS in app.tasks
    assert app.amqp.router.route({}, REDRIVE_PENDING_ACCOUNTS)["queue"].name == "maintenance"
    assert settings.pending_account_redrive_after_seconds == 900.0
    custom = Settings(pending_account_redrive_after_seconds=60)
    policy = build_services(custom, sessions=None).policy
    assert policy.pending_account_redrive_after == timedelta(seconds=60)
