"""``billing-worker``: run the system, its parts, and the operator's admin commands.

Every command reads the same ``BILLING_*`` settings, so admin commands reach the same
database as ``up``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from worker.settings import get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from domain.ports import Clock
    from worker.admin import OperatorContext
    from worker.dead_letters import DeadLetter, DeadLetters


T = TypeVar("T")
CLI_MAX_BUDGET_WAIT_SECONDS = 120.0


def _emit(as_json: bool, data: dict[str, Any], text: str) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def _sessions() -> sessionmaker[Session]:
    from worker.db.engine import session_factory

    return session_factory()


def _clock() -> Clock:
    from worker.bootstrap import build_clock

    return build_clock(get_settings())


def _operator() -> OperatorContext:
    """Admin commands reach the provider as the workers do (the emulator of a running `up`
    when no Stripe key is set)."""
    from functools import cache

    from worker.admin import OperatorContext
    from worker.bootstrap import BillingSettings, budget_for, provider_for

    settings = get_settings()
    return OperatorContext(
        sessions=_sessions(),
        clock=_clock(),
        # A command line simply waits its turn in the shared rate budget.
        provider_factory=cache(
            lambda: provider_for(
                settings, budget_for(settings, max_wait_seconds=CLI_MAX_BUDGET_WAIT_SECONDS)
            )
        ),
        billing=BillingSettings.of(settings),
    )


def _admin_errors(action: Callable[[], T]) -> T:
    """Run an admin action; domain errors become a clear message and exit status 1."""
    from pydantic import ValidationError

    from domain.errors import CommandError, TransientError

    try:
        return action()
    except CommandError as error:
        raise click.ClickException(json.dumps(error.to_body())) from None
    except TransientError as error:
        raise click.ClickException(f"{error.message} (try again)") from None
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or 'value'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise click.UsageError(problems) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    envvar="BILLING_DATA_DIR",
    help="Data directory [env BILLING_DATA_DIR; default ./.billing-worker].",
)
def main(data_dir: Path | None) -> None:
    """billing-worker: billing and user operations, performed reliably in the background."""
    if data_dir is not None:
        os.environ["BILLING_DATA_DIR"] = str(data_dir)
        get_settings.cache_clear()


# --- running the system ---------------------------------------------------------------------


@main.command()
@click.option("--api-port", type=int, envvar="BILLING_API_PORT", help="[env BILLING_API_PORT]")
@click.option(
    "--flower-port", type=int, envvar="BILLING_FLOWER_PORT", help="[env BILLING_FLOWER_PORT]"
)
@click.option("--concurrency", type=int, default=2, show_default=True, help="Worker processes.")
def up(api_port: int | None, flower_port: int | None, concurrency: int) -> None:
    """Run everything on embedded defaults: Redis, SQLite, migrations, Stripe emulator,
    worker, beat, API and Flower. Ctrl-C stops it all."""
    from worker.stack import LocalStack

    settings = get_settings()
    overrides = {}
    if api_port:
        overrides["api_port"] = api_port
    if flower_port:
        overrides["flower_port"] = flower_port
    stack = LocalStack(settings.model_copy(update=overrides), concurrency=concurrency)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    healthy = True
    try:
        stack.start(echo=click.echo)
        healthy = stack.watch()
    except KeyboardInterrupt:
        click.echo("\nstopping…")
    finally:
        stack.stop()
        click.echo("stopped.")
    if not healthy:
        sys.exit(1)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker on every queue (extra arguments go to `celery worker`)."""
    from worker.embedded import celery_worker_argv

    argv = celery_worker_argv(loglevel=get_settings().log_level)
    os.execv(argv[0], [*argv, *celery_args])


@main.command()
def beat() -> None:
    """Run celery beat (the periodic sweeps)."""
    from worker.embedded import celery_beat_argv

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    argv = celery_beat_argv(settings.data_dir / "celerybeat-schedule", settings.log_level)
    os.execv(argv[0], argv)


@main.command()
@click.option("--host", default=None, help="[env BILLING_API_HOST; default 127.0.0.1]")
@click.option("--port", type=int, default=None, help="[env BILLING_API_PORT; default 8080]")
def api(host: str | None, port: int | None) -> None:
    """Run the HTTP API (uvicorn)."""
    import uvicorn

    from worker.embedded import API_HTTP_PROTOCOL, MAX_REQUEST_HEAD_BYTES

    settings = get_settings()
    uvicorn.run(
        "worker.api.app:asgi_app",
        factory=True,
        host=host or settings.api_host,
        port=port or settings.api_port,
        access_log=False,
        http=API_HTTP_PROTOCOL,  # bounds the request head's size and time (embedded.api_argv)
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
    )


@main.command()
@click.option("--port", type=int, default=None, help="[env BILLING_FLOWER_PORT; default 5555]")
def flower(port: int | None) -> None:
    """Run Flower, with basic auth from BILLING_FLOWER_USER / BILLING_FLOWER_PASSWORD."""
    from worker.embedded import flower_argv, flower_env

    settings = get_settings()
    if settings.flower_password is None:
        raise click.UsageError("set BILLING_FLOWER_PASSWORD")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    argv = flower_argv(
        settings.api_host, port or settings.flower_port, settings.data_dir / "flower.db"
    )
    env = {
        **os.environ,
        **flower_env(settings.flower_user, settings.flower_password.get_secret_value()),
    }
    os.execve(argv[0], argv, env)


@main.command()
def migrate() -> None:
    """Apply database migrations."""
    from worker.db.migrate import upgrade

    settings = get_settings()
    upgrade(settings.resolved_database_url())
    click.echo(f"migrated {settings.resolved_database_url()}")


@main.command(
    "stripe-emulator",
    context_settings={"ignore_unknown_options": True},
    add_help_option=False,
)
@click.argument("emulator_args", nargs=-1, type=click.UNPROCESSED)
def stripe_emulator(emulator_args: tuple[str, ...]) -> None:
    """Run the Stripe emulator alone (`--help` lists its options: --host, --port, --api-key,
    --rate-limit, --state-file)."""
    from worker.stack import require_emulator

    require_emulator()
    argv = [sys.executable, "-m", "stripe_emulator", *emulator_args]
    os.execv(argv[0], argv)


# --- admin ----------------------------------------------------------------------------------


@main.group()
def clients() -> None:
    """API clients (HTTP Basic credentials)."""


@clients.command("create")
@click.option("--name", required=True)
@click.option("--json", "as_json", is_flag=True)
def clients_create(name: str, as_json: bool) -> None:
    """Create a client; its secret is printed once and never again."""
    from worker.clients import create_client

    client = create_client(_sessions(), _clock(), name)
    _emit(
        as_json,
        {"client_id": client.client_id, "client_secret": client.secret, "name": name},
        f"client_id:     {client.client_id}\nclient_secret: {client.secret}\n"
        "(the secret is shown once; store it now)",
    )


@main.group()
def orgs() -> None:
    """Organizations."""


@orgs.command("create")
@click.option("--name", required=True)
@click.option("--title", default="")
@click.option("--id", "org_id", default=None)
@click.option("--disabled", is_flag=True)
@click.option(
    "--avatar-file",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="An image (< 2 MB), stored base64-encoded.",
)
@click.option("--json", "as_json", is_flag=True)
def orgs_create(
    name: str,
    title: str,
    org_id: str | None,
    disabled: bool,
    avatar_file: Path | None,
    as_json: bool,
) -> None:
    """Create an organization."""
    import base64

    from domain.errors import CommandError
    from worker.admin import create_organization

    avatar = base64.b64encode(avatar_file.read_bytes()).decode() if avatar_file else None
    try:
        org = create_organization(
            _sessions(),
            _clock(),
            name=name,
            title=title,
            org_id=org_id,
            avatar=avatar,
            disabled=disabled,
        )
    except CommandError as error:
        raise click.ClickException(json.dumps(error.to_body())) from None
    view = org.to_view()
    _emit(as_json, view, org.id)


@main.group()
def users() -> None:
    """Users."""


@users.command("create")
@click.option("--email", required=True)
@click.option("--name", default="")
@click.option("--id", "user_id", default=None)
@click.option("--disabled", is_flag=True, help="Create the user disabled.")
@click.option("--json", "as_json", is_flag=True)
def users_create(email: str, name: str, user_id: str | None, disabled: bool, as_json: bool) -> None:
    """Create a user."""
    from worker.admin import create_user

    user = create_user(
        _sessions(), _clock(), email=email, name=name, user_id=user_id, disabled=disabled
    )
    _emit(as_json, user, str(user["id"]))


@main.group()
def plans() -> None:
    """Plans: a product with one recurring price at the provider."""


@plans.command("create")
@click.option("--name", required=True, help="Unique name, e.g. starter (a-z, 0-9, - and _).")
@click.option("--title", default="", help="Shown on invoices; default: from the name.")
@click.option("--amount", type=int, required=True, help="Price per interval in minor units.")
@click.option("--currency", required=True, help="ISO 4217, e.g. usd.")
@click.option(
    "--interval", type=click.Choice(["month", "year"]), default="month", show_default=True
)
@click.option("--id", "plan_id", default=None, help="Default: a new plan_… id.")
@click.option("--json", "as_json", is_flag=True)
def plans_create(
    name: str,
    title: str,
    amount: int,
    currency: str,
    interval: str,
    plan_id: str | None,
    as_json: bool,
) -> None:
    """Create a plan, with its product and price at the provider. Running it again after a
    failure resumes the same plan."""
    from domain.plans import PlanSpec
    from worker.admin import create_plan

    plan = _admin_errors(
        lambda: create_plan(
            _operator(),
            PlanSpec(name=name, title=title, amount=amount, currency=currency, interval=interval),
            plan_id=plan_id,
        )
    )
    _emit(as_json, plan.to_view(), plan.id)


@plans.command("list")
@click.option("--json", "as_json", is_flag=True)
def plans_list(as_json: bool) -> None:
    """List the plans."""
    from worker.admin import list_plans

    found = list_plans(_operator())
    if as_json:
        click.echo(json.dumps([plan.to_view() for plan in found], indent=2, sort_keys=True))
        return
    for plan in found:
        click.echo(
            f"{plan.id}  {plan.name:<16} {plan.amount:>9} {plan.currency} / {plan.interval.value}"
            f"  {plan.provider_price_id or '(not at the provider)'}"
        )


@main.group()
def subscriptions() -> None:
    """Subscriptions of billing accounts to plans."""


@subscriptions.command("create")
@click.option("--org", "org_id", required=True, help="The organization's id.")
@click.option("--billing-account", "billing_account_id", required=True)
@click.option("--plan", "plan_ref", required=True, help="The plan's name or id.")
@click.option("--id", "subscription_id", default=None, help="Default: a new sub_… id.")
@click.option(
    "--collection",
    type=click.Choice(["send_invoice", "charge_automatically"]),
    default="send_invoice",
    show_default=True,
    help="send_invoice: active at once, no payment method needed (Stripe emails an invoice); "
    "charge_automatically: needs the customer's default payment method.",
)
@click.option("--days-until-due", type=click.IntRange(0, 730), default=30, show_default=True)
@click.option("--trial-days", type=click.IntRange(0, 730), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def subscriptions_create(
    org_id: str,
    billing_account_id: str,
    plan_ref: str,
    subscription_id: str | None,
    collection: str,
    days_until_due: int,
    trial_days: int,
    as_json: bool,
) -> None:
    """Subscribe a registered billing account to a plan at the provider. To retry a creation
    that failed midway, run it again with the same --id."""
    from typing import Literal, cast

    from domain.subscriptions import SubscriptionTerms
    from worker.admin import create_subscription

    terms = SubscriptionTerms(
        collection_method=cast(Literal["send_invoice", "charge_automatically"], collection),
        days_until_due=days_until_due,
        trial_days=trial_days,
    )
    subscription = _admin_errors(
        lambda: create_subscription(
            _operator(),
            org_id=org_id,
            billing_account_id=billing_account_id,
            plan_ref=plan_ref,
            terms=terms,
            subscription_id=subscription_id,
        )
    )
    _emit(as_json, subscription.to_view(), subscription.id)


@subscriptions.command("show")
@click.argument("subscription_id")
@click.option("--json", "as_json", is_flag=True)
def subscriptions_show(subscription_id: str, as_json: bool) -> None:
    """A subscription: its plan, its period and its plan changes (newest first)."""
    from worker.admin import subscription_report

    report = _admin_errors(lambda: subscription_report(_operator(), subscription_id))
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    plan = report["plan"] or {}
    click.echo(
        f"{report['id']}  {report['state']}  plan {plan.get('name', '?')} ({report['plan_id']})"
    )
    click.echo(f"  period   {report['current_period_start']} → {report['current_period_end']}")
    for change in report["changes"]:
        lag = change["apply_lag_seconds"]
        click.echo(
            f"  {change['id']}  {change['state']:<9} {change['kind']:<13} → {change['plan_id']}"
            f"  effective {change['effective_at']}"
            + (f"  lag {lag:.1f}s" if lag is not None else "")
            + (f"  ({change['reason']})" if change["reason"] else "")
        )


@subscriptions.command("seed-period-end")
@click.argument("count", type=click.IntRange(1, 100_000))
@click.option("--org", "org_id", default="org_demo", show_default=True)
@click.option("--billing-account", "billing_account_id", default="ba_demo", show_default=True)
@click.option("--plan", "plan_ref", default="starter", show_default=True)
@click.option("--to", "target_plan_ref", default="team", show_default=True)
def subscriptions_seed_period_end(
    count: int, org_id: str, billing_account_id: str, plan_ref: str, target_plan_ref: str
) -> None:
    """Make COUNT subscriptions, each with a plan change at its period's end: the period-end
    burst (then `billing-worker clock advance 31d` on a local stack makes them all due)."""
    import time

    from worker.admin import seed_period_end_changes

    began = time.monotonic()

    def progress(done: int) -> None:
        if done % 100 == 0 or done == count:
            click.echo(f"  {done}/{count} subscriptions ({time.monotonic() - began:.0f}s)")

    change_ids = _admin_errors(
        lambda: seed_period_end_changes(
            _operator(),
            org_id=org_id,
            billing_account_id=billing_account_id,
            plan_ref=plan_ref,
            target_plan_ref=target_plan_ref,
            count=count,
            progress=progress,
        )
    )
    click.echo(
        f"{len(change_ids)} changes from {plan_ref} to {target_plan_ref} scheduled at the end "
        f"of the period; `billing-worker clock advance 31d` makes them due"
    )


@main.group()
def stripe() -> None:
    """The Stripe account as this system uses it."""


@stripe.command("budget")
@click.option("--json", "as_json", is_flag=True)
def stripe_budget(as_json: bool) -> None:
    """The shared rate budget: configured and current rate, calls in the last minute, calls
    waiting for a token, and 429s."""
    import dataclasses

    from worker.bootstrap import budget_for

    budget = budget_for(get_settings())
    if not budget.enabled:
        raise click.ClickException(
            "no rate budget: BILLING_STRIPE_BUDGET_ENABLED is off, or no Stripe key is set"
        )
    usage = budget.usage()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(usage), indent=2, sort_keys=True))
        return
    click.echo(
        f"stripe account {usage.account} ({usage.mode} mode)  burst {usage.burst}  "
        f"longest wait in a task {usage.max_wait_seconds:g}s"
    )
    click.echo(
        f"  {'':<6} {'rate/s':>7} {'now/s':>7} {'calls/min':>10} {'waiting':>8} "
        f"{'deferred/min':>13} {'429/min':>8} {'429 total':>10} {'waited s':>9} {'ahead s':>8}"
    )
    for kind, figures in usage.kinds.items():
        click.echo(
            f"  {kind.value:<6} {figures.configured_rate:>7g} {figures.effective_rate:>7.1f} "
            f"{figures.calls_last_minute:>10} {figures.waiting:>8} "
            f"{figures.deferred_last_minute:>13} {figures.rate_limited_last_minute:>8} "
            f"{figures.rate_limited_total:>10} {figures.wait_seconds_total:>9.1f} "
            f"{figures.backlog_seconds:>8.2f}"
        )


@main.group()
def commands() -> None:
    """The command log: inspect and replay."""


@commands.command("show")
@click.argument("command_id")
def commands_show(command_id: str) -> None:
    """Print one command's record."""
    from worker.api.gateway import record_view
    from worker.bootstrap import bootstrap

    record = bootstrap().commands.get(command_id)
    if record is None:
        raise click.ClickException(f"no command {command_id}")
    click.echo(json.dumps({**record_view(record), "payload": record.payload}, indent=2))


@commands.command("failed")
@click.option("--limit", type=int, default=50, show_default=True)
def commands_failed(limit: int) -> None:
    """List failed commands, newest first."""
    from worker.bootstrap import bootstrap

    for record in bootstrap().commands.list_failed(limit):
        message = (record.error or {}).get("message", "")
        click.echo(
            f"{record.id}  {record.type:<28} {record.updated_at:%Y-%m-%d %H:%M:%S}  {message}"
        )
    letters = _dead_letters().count()
    if letters:
        click.echo(
            f"and {letters} dead letters: messages no worker could take "
            "(`billing-worker dead-letters list`)"
        )


@commands.command("replay")
@click.argument("command_ids", nargs=-1, required=True)
def commands_replay(command_ids: tuple[str, ...]) -> None:
    """Run finished commands again (same command id, so still idempotent)."""
    from worker.bootstrap import bootstrap
    from worker.celery_app import app
    from worker.dispatch import publish

    log = bootstrap().commands
    for command_id in command_ids:
        record = log.requeue(command_id)
        if record is None:
            raise click.ClickException(f"no command {command_id}")
        publish(app, record)
        log.mark_published(record.id)
        click.echo(f"replayed {command_id}")


def _dead_letters() -> DeadLetters:
    import redis

    from worker.dead_letters import DeadLetters

    return DeadLetters(redis.Redis.from_url(get_settings().resolved_redis_url()))


def _letter(letter_id: str) -> DeadLetter:
    letter = _dead_letters().get(letter_id)
    if letter is None:
        raise click.ClickException(f"no dead letter {letter_id}")
    return letter


@main.group("dead-letters")
def dead_letters() -> None:
    """Messages no worker could take from a queue: undecodable, malformed, oversized, of an
    unknown task, or reusing another command's id."""


@dead_letters.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def dead_letters_list(limit: int, as_json: bool) -> None:
    """The newest dead letters first."""
    store = _dead_letters()
    letters = store.list(limit)
    if as_json:
        click.echo(json.dumps([letter.to_view() for letter in letters], indent=2))
        return
    click.echo(f"{store.count()} dead letters kept ({store.total()} recorded in all)")
    for letter in letters:
        click.echo(
            f"{letter.id}  {letter.at:%Y-%m-%d %H:%M:%S}  {letter.queue:<13} "
            f"{letter.size:>8} B  {letter.task or '-'}  {letter.reason}"
        )


@dead_letters.command("show")
@click.argument("letter_id")
def dead_letters_show(letter_id: str) -> None:
    """One dead letter with its raw bytes (as text, undecodable bytes escaped)."""
    click.echo(json.dumps(_letter(letter_id).to_view(with_raw=True), indent=2))


@dead_letters.command("replay")
@click.argument("letter_id")
def dead_letters_replay(letter_id: str) -> None:
    """Put the message back on its queue, if a worker can take it now (say, its task was
    unknown to the workers of the day); then drop the letter."""
    import redis

    from worker.broker import Rejected, check_envelope

    letter = _letter(letter_id)
    if letter.truncated:
        raise click.ClickException(f"dead letter {letter_id} was kept truncated: cannot replay")
    try:
        check_envelope(letter.raw)
    except Rejected as why:
        raise click.ClickException(
            f"dead letter {letter_id} still cannot be taken: {why}"
        ) from None
    redis.Redis.from_url(get_settings().resolved_redis_url()).lpush(letter.queue, letter.raw)
    _dead_letters().drop(letter_id)
    click.echo(f"replayed {letter_id} onto {letter.queue}")


@dead_letters.command("drop")
@click.argument("letter_ids", nargs=-1, required=True)
def dead_letters_drop(letter_ids: tuple[str, ...]) -> None:
    """Forget dead letters."""
    store = _dead_letters()
    for letter_id in letter_ids:
        if not store.drop(letter_id):
            raise click.ClickException(f"no dead letter {letter_id}")
        click.echo(f"dropped {letter_id}")


@main.group()
def clock() -> None:
    """The local stack's clock (never available with real Stripe)."""


@clock.command("advance")
@click.argument("duration")
def clock_advance(duration: str) -> None:
    """Move the application clock and the Stripe emulator's together, e.g. `31d`, `2h`."""
    from worker.clock import ShiftableClock
    from worker.stack import require_emulator

    require_emulator()
    from stripe_emulator import EmulatorAdmin, parse_duration

    try:
        seconds = parse_duration(duration)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="DURATION") from None
    settings = get_settings()
    stack = settings.stack()
    if not stack.get("shiftable_clock"):
        raise click.ClickException(
            "the clock can only move on a local stack started by `up` with the Stripe emulator"
        )
    # Stripe first: once the application's clock moves, beat may apply a change that fell
    # due, and the provider must already be in the new period when it does.
    emulator_url = stack.get("stripe_emulator_url")
    if emulator_url:
        EmulatorAdmin(str(emulator_url)).advance_clock(seconds)
    offset = ShiftableClock(settings.resolved_redis_url()).advance(seconds)
    click.echo(f"advanced {duration}; the clock is now {offset / 86400:.2f} days ahead")


if __name__ == "__main__":
    main()
