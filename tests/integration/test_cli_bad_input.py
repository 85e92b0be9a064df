"""Every admin command, run as an operator would (a process), refuses bad input in one line on
stderr with a non-zero exit status, never a traceback; global options work after a command's
name; every command's help names the environment variables it reads. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.migrate import upgrade
from domain.permissions import Scope
from domain.subscriptions.plans import Plan, PlanSpec
from tests.support.cli import assert_refused_in_one_line, billing_worker
from tests.support.records import create_organization, create_user, services_on
from worker.cli import main
from worker.local.embedded import free_port


@dataclass(frozen=True)
class Operator:
    """Settings of a migrated database holding an organization ``acme``, a user
    ``taken@example.com`` and a plan ``team`` (not yet at the provider)."""

    env: dict[str, str]
    acme_id: str
    data_dir: Path


def _operator(url: str, redis_url: str, data_dir: Path) -> Operator:
    sessions = session_factory(url)
    acme = create_organization(sessions, SystemClock(), name="acme")
    create_user(sessions, SystemClock(), email="taken@example.com")
    with services_on(sessions).unit_of_work() as uow:
        spec = PlanSpec(name="team", amount=2900, currency="usd")
        uow.plans.add(Plan.new("plan_team", spec, SystemClock().now()))
        uow.commit()
    return Operator(
        env={
            "BILLING_DATABASE_URL": url,
            "BILLING_DATA_DIR": str(data_dir),
            "BILLING_REDIS_URL": redis_url,
        },
        acme_id=acme.id,
        data_dir=data_dir,
    )


@pytest.fixture(scope="module")
def operator(
    make_database: Callable[[str], str],
    redis_server: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Operator:
    """An operator's command line on a database of each backend."""
    url = make_database(f"cli_{uuid.uuid4().hex[:8]}")
    return _operator(url, f"{redis_server}/9", tmp_path_factory.mktemp("cli"))


@pytest.fixture(scope="module")
def sqlite_operator(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Operator:
    """An operator's command line on SQLite only, for the long lists of refusals: they are
    the domain's and the CLI's, made alike on both databases (each process costs a second or
    two). What a database decides (uniqueness, lookups) runs on both in the other tests and
    in the contract tests."""
    data_dir = tmp_path_factory.mktemp("cli-sqlite")
    url = f"sqlite:///{data_dir / 'billing.db'}"
    upgrade(url)
    return _operator(url, f"{redis_server}/9", data_dir)


REFUSED = 1
USAGE = 2
UNAVAILABLE = 3

BAD_INPUT: list[tuple[str, tuple[str, ...], str]] = [
    ("org-name-taken", ("orgs", "create", "--name", "acme"), "organization name 'acme' is taken"),
    ("org-name-not-a-handle", ("orgs", "create", "--name", "Acme Ltd"), "name: must be letters"),
    ("org-id-not-an-id", ("orgs", "create", "--name", "a1", "--id", "../x"), "id: String"),
    (
        "org-avatar-not-an-image",
        ("orgs", "create", "--name", "a2", "--avatar-file", "{avatar}"),
        "invalid avatar",
    ),
    (
        "user-email-invalid",
        ("users", "create", "--email", "not-an-email"),
        "email: not a valid email address",
    ),
    (
        "user-email-taken",
        ("users", "create", "--email", "taken@example.com"),
        "user email 'taken@example.com' is taken",
    ),
    ("user-id-not-an-id", ("users", "create", "--email", "x@example.com", "--id", "a b"), "id:"),
    ("client-name-empty", ("clients", "create", "--name", " "), "invalid name"),
    (
        "client-org-not-an-id",
        ("clients", "create", "--name", "c", "--org", "a b"),
        "invalid org 'a b'",
    ),
    ("client-update-unknown", ("clients", "update", "cli_nope", "--name", "x"), "not found"),
    ("client-disable-unknown", ("clients", "disable", "cli_nope"), "'cli_nope' not found"),
    (
        "client-rotate-unknown",
        ("clients", "rotate-secret", "cli_nope", "--reason", "r"),
        "'cli_nope' not found",
    ),
    (
        "plan-currency-unknown",
        ("plans", "create", "--name", "p", "--amount", "1", "--currency", "XXY"),
        "currency: must be an ISO 4217 currency code",
    ),
    (
        "plan-currency-not-at-stripe",
        ("plans", "create", "--name", "p", "--amount", "1", "--currency", "XTS"),
        "currency: must be an ISO 4217 currency code that Stripe accepts",
    ),
    (
        "plan-amount-three-decimal-unrounded",
        ("plans", "create", "--name", "p", "--amount", "1234", "--currency", "kwd"),
        "amount: must be a multiple of 10 in KWD",
    ),
    (
        "plan-name-invalid",
        ("plans", "create", "--name", "no way", "--amount", "1", "--currency", "usd"),
        "name: String should match pattern",
    ),
    (
        "plan-amount-negative",
        ("plans", "create", "--name", "p", "--amount", "-5", "--currency", "usd"),
        "amount:",
    ),
    (
        "plan-name-taken",
        ("plans", "create", "--name", "team", "--amount", "1", "--currency", "usd"),
        "a plan named 'team' exists already",
    ),
    (
        "plan-id-not-an-id",
        ("plans", "create", "--name", "p", "--amount", "1", "--currency", "usd", "--id", "x/y"),
        "invalid id 'x/y'",
    ),
    (
        "subscription-account-unknown",
        (
            "subscriptions",
            "create",
            "--org",
            "{acme}",
            "--billing-account",
            "ba_nope",
            "--plan",
            "team",
        ),
        "billing_account 'ba_nope' not found",
    ),
    (
        "subscription-org-not-an-id",
        (
            "subscriptions",
            "create",
            "--org",
            "a b",
            "--billing-account",
            "ba_nope",
            "--plan",
            "team",
        ),
        "invalid org 'a b'",
    ),
    (
        "subscription-unknown",
        ("subscriptions", "show", "sub_nope"),
        "subscription 'sub_nope' not found",
    ),
    (
        "seed-plan-unknown",
        ("subscriptions", "seed-period-end", "1", "--plan", "nope"),
        "plan 'nope' not found",
    ),
    (
        "clock-not-a-local-stack",
        ("clock", "advance", "1d", "--reason", "r"),
        "the clock can only move",
    ),
    ("command-unknown", ("commands", "show", "nope"), "no command nope"),
    (
        "command-replay-unknown",
        ("commands", "replay", "nope", "--reason", "x"),
        "command 'nope' not found",
    ),
    ("dead-letter-unknown", ("dead-letters", "show", "nope"), "no dead letter nope"),
    ("dead-letter-drop-unknown", ("dead-letters", "drop", "nope"), "no dead letter nope"),
    ("stripe-budget-without-stripe", ("stripe", "budget"), "no rate budget"),
    (
        "stripe-drift-without-stripe",
        ("stripe", "drift"),
        "no billing provider is configured (BILLING_STRIPE_API_KEY is unset)",
    ),
    ("webhook-url-not-http", ("webhooks", "add", "ftp://x"), "'ftp://x' is not an http(s) URL"),
    ("webhook-url-no-host", ("webhooks", "add", "https://"), "is not an http(s) URL"),
    (
        "webhook-url-cloud-metadata",
        ("webhooks", "add", "http://169.254.169.254/latest/meta-data"),
        "'169.254.169.254' is not a public address",
    ),
    (
        "webhook-description-too-long",
        ("webhooks", "add", "https://hooks.example", "--description", "x" * 256),
        "the description is longer than 255 characters",
    ),
    ("webhook-unknown", ("webhooks", "show", "we_nope"), "webhook_endpoint 'we_nope' not found"),
    ("webhook-disable-unknown", ("webhooks", "disable", "we_nope"), "'we_nope' not found"),
    ("webhook-enable-unknown", ("webhooks", "enable", "we_nope"), "'we_nope' not found"),
    (
        "webhook-rotate-unknown",
        ("webhooks", "rotate-secret", "we_nope", "--reason", "r"),
        "'we_nope' not found",
    ),
    (
        "webhook-deliveries-endpoint-unknown",
        ("webhooks", "deliveries", "--endpoint", "we_nope"),
        "webhook_endpoint 'we_nope' not found",
    ),
    (
        "webhook-delivery-replay-unknown",
        ("webhooks", "replay", "whd_nope"),
        "webhook_delivery 'whd_nope' not found",
    ),
    (
        "webhook-replay-endpoint-unknown",
        ("webhooks", "replay", "--endpoint", "we_nope", "--failed"),
        "webhook_endpoint 'we_nope' not found",
    ),
]


@pytest.mark.parametrize(
    ("args", "says"), [pytest.param(args, says, id=name) for name, args, says in BAD_INPUT]
)
def test_an_admin_command_refuses_bad_input_in_one_line_and_exit_1(
    sqlite_operator: Operator, args: tuple[str, ...], says: str
) -> None:
    avatar = sqlite_operator.data_dir / "avatar.png"
    avatar.write_text("not an image")
    filled = [arg.format(avatar=avatar, acme=sqlite_operator.acme_id) for arg in args]

    done = billing_worker(*filled, env=sqlite_operator.env)

    assert_refused_in_one_line(done, status=REFUSED, says=says)


def test_a_taken_organization_name_names_the_organization_in_the_way(
    operator: Operator,
) -> None:
    done = billing_worker("orgs", "create", "--name", "acme", env=operator.env)

    assert done.stderr == f"Error: organization name 'acme' is taken ({operator.acme_id})\n"


def test_a_wrong_command_line_is_one_line_and_exit_2(operator: Operator) -> None:
    done = billing_worker("users", "create", "--mail", "a@example.com", env=operator.env)

    assert_refused_in_one_line(done, status=USAGE, says="No such option '--mail'")
    assert "billing-worker users create --help" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("webhooks", "replay"), "give DELIVERY_IDs, or --endpoint ID --failed"),
        (("webhooks", "replay", "--endpoint", "we_x"), "give DELIVERY_IDs, or --endpoint ID"),
        (("webhooks", "replay", "whd_x", "--failed"), "not both"),
        (("webhooks", "deliveries", "--limit", "0"), "Invalid value for '--limit'"),
        (("webhooks", "deliveries", "--state", "lost"), "Invalid value for '--state'"),
    ],
)
def test_a_webhook_command_line_that_says_too_little_or_too_much_is_exit_2(
    sqlite_operator: Operator, args: tuple[str, ...], says: str
) -> None:
    done = billing_worker(*args, env=sqlite_operator.env)

    assert_refused_in_one_line(done, status=USAGE, says=says)


WRONG_COMMAND_LINES: list[tuple[str, tuple[str, ...], str]] = [
    ("clock-duration-bad", ("clock", "advance", "31x"), "Invalid value for DURATION"),
    (
        "client-scope-unknown",
        ("clients", "create", "--name", "c", "--scope", "billing:delete"),
        "invalid --scope: unknown scope 'billing:delete'",
    ),
    (
        "client-orgs-and-all-orgs",
        ("clients", "update", "cli_nope", "--org", "org_a", "--all-orgs"),
        "give --org or --all-orgs, not both",
    ),
    (
        "webhook-event-unknown",
        ("webhooks", "add", "https://hooks.example", "--events", "user.enabled,user.deleted"),
        "invalid --events: unknown event type 'user.deleted'; known: billing_account.created",
    ),
    (
        "webhook-deliveries-failed-and-pending",
        ("webhooks", "deliveries", "--failed", "--state", "pending"),
        "--failed and --state pending: only failed deliveries, or those pending",
    ),
    ("up-yes-without-fresh", ("up", "--yes"), "--yes goes with --fresh"),
    ("up-fresh-unconfirmed", ("up", "--fresh"), "add --yes to confirm (stdin is no terminal)"),
]


@pytest.mark.parametrize(
    ("args", "says"),
    [pytest.param(args, says, id=name) for name, args, says in WRONG_COMMAND_LINES],
)
def test_a_value_not_of_its_options_form_or_options_that_exclude_each_other_exit_2(
    sqlite_operator: Operator, args: tuple[str, ...], says: str
) -> None:
    done = billing_worker(*args, env=sqlite_operator.env)

    assert_refused_in_one_line(done, status=USAGE, says=says)
    assert "--help`)" in done.stderr


def test_the_top_level_help_documents_the_exit_statuses() -> None:
    done = billing_worker("--help", env={})

    assert done.status == 0
    for status, meaning in (
        ("0", "done"),
        ("1", "refused"),
        ("2", "a wrong command line"),
        ("3", "unreachable"),
    ):
        assert any(
            line.strip().startswith(f"{status}  ") and meaning in line
            for line in done.stdout.splitlines()
        ), (status, done.stdout)


def test_an_unreachable_database_is_one_line_and_exit_3(tmp_path: Path) -> None:
    env = {
        "BILLING_DATABASE_URL": f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none",
        "BILLING_DATA_DIR": str(tmp_path),
    }

    done = billing_worker("orgs", "create", "--name", "acme", env=env)

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="the database is unreachable")


def test_a_database_never_migrated_is_one_line_saying_to_migrate(tmp_path: Path) -> None:
    done = billing_worker(
        "users", "create", "--email", "a@example.com", "--data-dir", str(tmp_path), env={}
    )

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="run `billing-worker migrate`")


def test_an_unreachable_redis_is_one_line_and_exit_3(tmp_path: Path) -> None:
    env = {
        "BILLING_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "BILLING_DATA_DIR": str(tmp_path),
    }

    done = billing_worker("dead-letters", "list", env=env)

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="Redis is unreachable")


def test_data_dir_is_honoured_after_the_commands_name(tmp_path: Path) -> None:
    data_dir = tmp_path / "after"

    migrated = billing_worker("migrate", "--data-dir", str(data_dir), env={})
    created = billing_worker(
        "orgs", "create", "--name", "acme", "--data-dir", str(data_dir), env={}
    )
    again = billing_worker("--data-dir", str(data_dir), "orgs", "create", "--name", "acme", env={})

    assert migrated.status == 0, migrated.stderr
    assert str(data_dir / "billing.db") in migrated.stdout
    assert created.status == 0, created.stderr
    assert again.stderr == f"Error: organization name 'acme' is taken ({created.stdout.strip()})\n"


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        elif command.add_help_option:
            yield (*path, name)


@pytest.mark.parametrize("path", [pytest.param(p, id=" ".join(p)) for p in _commands(main)])
def test_every_commands_help_names_the_environment_variables_it_reads(
    path: tuple[str, ...],
) -> None:
    shown = CliRunner().invoke(main, [*path, "--help"])

    assert shown.exit_code == 0, shown.output
    assert "--data-dir" in shown.output
    assert "BILLING_DATA_DIR" in shown.output
    assert "Environment" in shown.output


def test_a_plans_amount_is_asked_for_in_minor_units_of_its_currency() -> None:
    shown = CliRunner().invoke(main, ["plans", "create", "--help"])

    words = " ".join(shown.output.split())
    assert "minor units of the currency (cents; whole yen for zero-decimal currencies)" in words


def test_plans_are_listed_with_their_prices_in_their_currencys_own_units(
    sqlite_operator: Operator,
) -> None:
    sessions = session_factory(sqlite_operator.env["BILLING_DATABASE_URL"])
    with services_on(sessions).unit_of_work() as uow:
        yen = PlanSpec(name="yen", amount=500, currency="JPY")
        uow.plans.add(Plan.new(f"plan_yen_{uuid.uuid4().hex[:8]}", yen, SystemClock().now()))
        uow.commit()

    done = billing_worker("plans", "list", env=sqlite_operator.env)

    assert done.status == 0, done.stderr
    assert "29.00 USD / month" in done.stdout
    assert "500 JPY / month" in done.stdout


def test_the_billing_worker_entry_point_runs_the_cli() -> None:
    script = Path(sys.executable).parent / "billing-worker"

    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    assert "BILLING_DATA_DIR" in done.stdout


def test_a_client_is_created_with_scopes_then_updated_disabled_and_given_a_new_secret(
    operator: Operator,
) -> None:
    def run(*args: str) -> dict[str, object]:
        done = billing_worker(*args, "--json", env=operator.env)
        assert done.status == 0, done.stderr
        parsed: dict[str, object] = json.loads(done.stdout)
        return parsed

    created = run("clients", "create", "--name", "billing-svc", "--scope", "billing:create")
    client_id = str(created["client_id"])
    assert (created["scopes"], created["org_ids"]) == (["billing:create"], None)

    limited = run("clients", "update", client_id, "--org", operator.acme_id)
    widened = run("clients", "update", client_id, "--scope", "*", "--all-orgs")
    disabled = run("clients", "disable", client_id)
    rotated = run("clients", "rotate-secret", client_id, "--reason", "rotated")
    listed = json.loads(billing_worker("clients", "list", "--json", env=operator.env).stdout)

    assert (limited["scopes"], limited["org_ids"]) == (["billing:create"], [operator.acme_id])
    assert widened["org_ids"] is None
    assert len(widened["scopes"]) == len(Scope)  # type: ignore[arg-type]
    assert disabled["enabled"] is False
    assert rotated["client_secret"] != created["client_secret"]
    assert "secret" not in json.dumps(listed).replace("client_secret", "")
    assert [c["enabled"] for c in listed if c["client_id"] == client_id] == [False]


def test_a_new_client_holds_only_the_default_scope(operator: Operator) -> None:
    done = billing_worker("clients", "create", "--name", "least", "--json", env=operator.env)
    assert done.status == 0, done.stderr
    assert '"scopes": [\n    "commands:read"\n  ]' in done.stdout
