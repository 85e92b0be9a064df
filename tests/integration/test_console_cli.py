"""The operator console on the command line, run as an operator runs it (a process of its
own): every list has a header and says so when empty, pages with --limit/--after and prints
JSON with --json; `accounts show` tells an account's story by its organization's id; the
actions change what they say and refuse in one line. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from tests.support.cli import Done, billing_worker
from tests.support.records import create_organization, create_user


@pytest.fixture(scope="module")
def env(
    make_database: Callable[[str], str], redis_server: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    url = make_database(f"console_cli_{uuid.uuid4().hex[:8]}")
    return {
        "BILLING_DATABASE_URL": url,
        "BILLING_DATA_DIR": str(tmp_path_factory.mktemp("console-cli")),
        "BILLING_REDIS_URL": f"{redis_server}/10",
    }


def pending_account(env: dict[str, str]) -> BillingAccount:
    sessions = session_factory(env["BILLING_DATABASE_URL"])
    organization = create_organization(sessions, SystemClock(), name=f"acme-{uuid.uuid4().hex[:8]}")
    account = BillingAccount.open(
        f"ba_{uuid.uuid4().hex[:12]}",
        organization,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=False,
        default_currency="usd",
        now=SystemClock().now(),
    )
    with SqlUnitOfWork(sessions) as uow:
        uow.billing_accounts.add(account)
        uow.commit()
    return account


def ok(done: Done) -> str:
    assert done.status == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_an_empty_list_prints_its_header_and_says_there_is_none(env: dict[str, str]) -> None:
    shown = ok(billing_worker("subscriptions", "list", env=env)).splitlines()

    assert shown[0].split() == [
        "ID",
        "ACCOUNT",
        "PLAN",
        "STATE",
        "STRIPE",
        "ID",
        "PERIOD",
        "END",
        "PENDING",
    ]
    assert shown[1:] == ["no subscriptions"]
    in_flight = ok(billing_worker("commands", "list", env=env)).splitlines()
    assert in_flight[0].startswith("ID")
    assert in_flight[-1] == "no commands in flight"


def test_a_list_pages_with_its_cursor_and_prints_json(env: dict[str, str]) -> None:
    sessions = session_factory(env["BILLING_DATABASE_URL"])
    for _ in range(3):
        create_user(sessions, SystemClock(), email=f"u-{uuid.uuid4().hex[:8]}@example.com")

    first = json.loads(ok(billing_worker("users", "list", "--limit", "2", "--json", env=env)))
    text = ok(billing_worker("users", "list", "--limit", "2", env=env)).splitlines()
    rest = json.loads(
        ok(billing_worker("users", "list", "--after", first["next_cursor"], "--json", env=env))
    )

    assert len(first["items"]) == 2
    assert text[0].split()[:2] == ["ID", "EMAIL"]
    assert text[-1] == f"more: --after {first['next_cursor']}"
    assert rest["next_cursor"] is None
    ids = [user["id"] for user in first["items"] + rest["items"]]
    assert ids == sorted(set(ids))


def test_an_accounts_story_is_shown_by_its_organizations_id(env: dict[str, str]) -> None:
    account = pending_account(env)

    text = ok(billing_worker("accounts", "show", account.org_id, env=env))
    shown = json.loads(ok(billing_worker("accounts", "show", account.id, "--json", env=env)))

    assert f"billing account {account.id}" in text
    assert "stripe         none (offline)" in text
    assert f"key {account.registration_key}" in text
    assert shown["billing_account"]["id"] == account.id
    assert shown["registration_key"] == account.registration_key


def test_marking_a_pending_account_offline_shows_in_its_story(env: dict[str, str]) -> None:
    account = pending_account(env)

    said = ok(billing_worker("accounts", "mark-offline", account.org_id, "--reason", "r", env=env))
    again = ok(billing_worker("accounts", "mark-offline", account.id, "--reason", "r", env=env))
    story = json.loads(ok(billing_worker("accounts", "show", account.id, "--json", env=env)))

    assert said.strip() == f"{account.id} marked offline"
    assert again.strip() == f"{account.id} already offline"
    assert story["billing_account"]["state"] == "active"
    assert [event["type"] for event in story["events"]] == ["billing_account.marked_offline"]


def test_an_action_on_the_command_line_is_audited_with_who_why_and_what_it_changed(
    env: dict[str, str],
) -> None:
    account = pending_account(env)
    other = pending_account(env)
    mark = ("accounts", "mark-offline", account.id, "--reason", "registered by hand")

    ok(billing_worker(*mark, "--operator", "ann", env=env))
    ok(billing_worker(*mark, env={**env, "BILLING_OPERATOR": "bob"}))
    ok(billing_worker("accounts", "mark-offline", other.id, "--reason", "x", env=env))
    audit = json.loads(ok(billing_worker("audit", "--target", account.id, "--json", env=env)))
    story = json.loads(ok(billing_worker("accounts", "show", account.id, "--json", env=env)))
    told = ok(billing_worker("accounts", "show", account.id, env=env))

    bob, ann = audit
    assert (ann["operator"], bob["operator"]) == ("ann", "bob")
    assert ann["surface"] == "cli"
    assert ann["action"] == "mark-offline"
    assert ann["reason"] == "registered by hand"
    assert ann["targets"] == [f"billing_account:{account.id}"]
    assert ann["changes"] == [f"billing_account.marked_offline billing_account:{account.id}"]
    assert bob["changes"] == [f"{account.id} already offline"]
    assert [entry["id"] for entry in story["audit"]] == [ann["id"], bob["id"]]
    assert f"mark-offline by ann (cli) on billing_account:{account.id}: registered by hand" in told
    with SqlUnitOfWork(session_factory(env["BILLING_DATABASE_URL"])) as uow:
        event = uow.events.get(exported(env, ann["id"]))
    assert event is not None
    assert event.document["data"]["operator"] == "ann"


def exported(env: dict[str, str], action_id: str) -> str:
    """The id of the ``operator.action_taken`` event of the action ``action_id``."""
    from sqlalchemy import select

    from adapters.db.models import EventRow

    with session_factory(env["BILLING_DATABASE_URL"])() as session:
        return session.scalars(
            select(EventRow.id).where(
                EventRow.type == "operator.action_taken", EventRow.command_id == action_id
            )
        ).one()


def test_the_audit_trail_is_filtered_by_operator_action_and_time(env: dict[str, str]) -> None:
    account = pending_account(env)
    mark = ("accounts", "mark-offline", account.id, "--reason", "why not")
    ok(billing_worker(*mark, "--operator", f"carol-{account.id}", env=env))

    def listed(*wanted: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads(
            ok(billing_worker("audit", *wanted, "--json", env=env))
        )
        return found

    [mine] = listed("--operator", f"carol-{account.id}")
    assert mine["targets"] == [f"billing_account:{account.id}"]
    assert listed("--operator", f"carol-{account.id}", "--action", "retry-command") == []
    assert listed("--operator", f"carol-{account.id}", "--since", "1d") == [mine]
    assert listed("--operator", f"carol-{account.id}", "--since", "2999-01-01") == []
    assert listed("--target", f"billing_account:{account.id}") == [mine]
    assert ok(billing_worker("audit", "--operator", "nobody", env=env)) == (
        "no audit entries match\n"
    )


def test_an_action_without_a_reason_is_refused_in_one_line_and_changes_nothing(
    env: dict[str, str],
) -> None:
    account = pending_account(env)

    done = billing_worker("accounts", "mark-offline", account.id, env=env)

    assert done.status == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert "mark-offline needs a reason" in line
    story = json.loads(ok(billing_worker("accounts", "show", account.id, "--json", env=env)))
    assert story["billing_account"]["state"] == "pending"
    assert story["audit"] == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("accounts", "show", "org_nowhere"), "no billing account org_nowhere"),
        (("accounts", "show", "a b"), "invalid org_or_account 'a b'"),
        (("commands", "list", "--after", "nope"), "after must be the next_cursor"),
        (("commands", "retry", "cmd_nowhere", "--reason", "x"), "command 'cmd_nowhere' not found"),
        (
            ("subscriptions", "skip-change", "chg_nowhere", "--reason", "x"),
            "scheduled_change 'chg_nowhere'",
        ),
        (("subscriptions", "show", "sub_nowhere"), "subscription 'sub_nowhere' not found"),
    ],
)
def test_a_console_command_refuses_in_one_line_and_exit_1(
    env: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    done = billing_worker(*args, env=env)

    assert "Traceback" not in done.stderr + done.stdout
    assert done.status == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert says in line


def test_a_bad_list_option_is_a_wrong_command_line(env: dict[str, str]) -> None:
    done = billing_worker("accounts", "list", "--limit", "0", env=env)

    assert done.status == 2
    assert len(done.stderr.splitlines()) == 1
