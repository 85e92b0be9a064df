"""``billing-worker up``: the whole system on embedded defaults, as child processes."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from worker.launch.commands import (
    api_argv,
    celery_beat_argv,
    celery_worker_argv,
    flower_argv,
    flower_env,
    worker_metrics_env,
)
from worker.local.embedded import ProcessGroup, free_port, port_open, start_redis, wait_until
from worker.settings import STACK_FILE, Settings

DEMO_CLIENT_FILE = "demo-client.json"
DEMO_ORG_ID = "org_demo"
DEMO_USER_ID = "usr_demo"
DEMO_BILLING_ACCOUNT_ID = "ba_demo"
DEMO_SUBSCRIPTION_ID = "sub_demo"
DEMO_UNBILLED_ORG_ID = "org_acme"
"""An organization without a billing account, to try creating one."""
DEMO_PLANS = (
    # id, name, title, amount (cents a month)
    ("plan_starter", "starter", "Starter", 900),
    ("plan_team", "team", "Team", 2900),
)


EMULATOR_NOT_INSTALLED = (
    "the Stripe emulator is not installed: run `pip install -e ./stripe_emulator` "
    "(`python3 -m worker.dev up` does)"
)


def require_emulator(alternative: str = "") -> None:
    """Exit with one line (ending in ``alternative``, if any) unless the Stripe emulator is
    installed.

    It is a development tool with a distribution of its own (``stripe_emulator/``), absent from
    the production wheel and image, so ``worker`` imports it only where it runs it, after this.
    """
    if importlib.util.find_spec("stripe_emulator") is None:
        raise SystemExit(f"{EMULATOR_NOT_INSTALLED}{alternative}")


def emulator_api_key() -> str:
    """The secret key the Stripe emulator accepts."""
    require_emulator(", or set BILLING_STRIPE_API_KEY to use Stripe")
    from stripe_emulator import DEFAULT_API_KEY

    return DEFAULT_API_KEY


def write_stack_file(settings: Settings, stack: dict[str, Any]) -> Path:
    path = settings.data_dir / STACK_FILE
    path.touch(mode=0o600)  # it holds the Redis URL, password included
    path.chmod(0o600)
    path.write_text(json.dumps(stack, indent=2, sort_keys=True))
    return path


def demo_credentials(settings: Settings) -> tuple[str, str, bool]:
    """The demo client's id and secret, kept in the data directory (local stack only)."""
    path = settings.data_dir / DEMO_CLIENT_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        return str(saved["client_id"]), str(saved["client_secret"]), False
    client_id, secret = "demo", secrets.token_urlsafe(24)
    path.write_text(json.dumps({"client_id": client_id, "client_secret": secret}))
    path.chmod(0o600)
    return client_id, secret, True


def children_log_format(settings: Settings) -> str:
    """The log format of the processes ``up`` starts: lines for a terminal, unless
    ``BILLING_LOG_FORMAT`` says otherwise (the separate processes of a deployment write JSON
    by default)."""
    return settings.log_format if "log_format" in settings.model_fields_set else "console"


def elapsed_since(start: float) -> str:
    return f"{time.monotonic() - start:.1f}s"


class LocalStack:
    def __init__(self, settings: Settings, *, concurrency: int = 2) -> None:
        self.settings = settings
        self.concurrency = concurrency
        self.group = ProcessGroup()
        self.data_dir = settings.data_dir.resolve()
        # Checked here, before anything starts: without a Stripe key, `up` runs the emulator.
        self.emulator_key = emulator_api_key() if settings.stripe_api_key is None else None

    def start(self, echo: Callable[[str], None]) -> dict[str, Any]:
        began = time.monotonic()
        settings = self.settings
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        host = settings.api_host
        emulator_key = self.emulator_key
        for port, what in ((settings.api_port, "API"), (settings.flower_port, "Flower")):
            if port_open(host, port):
                raise SystemExit(
                    f"port {port} for the {what} is taken; choose another "
                    f"(--api-port / --flower-port)"
                )

        log_format = children_log_format(settings)
        env: dict[str, str] = {
            "BILLING_DATA_DIR": str(self.data_dir),
            "BILLING_LOG_FORMAT": log_format,
        }
        redis_url = settings.redis_url or start_redis(
            self.group, self.data_dir / "redis", log_path=logs / "redis.log"
        )
        env["BILLING_REDIS_URL"] = redis_url

        emulator_url = None
        if emulator_key is not None:
            emulator_port = free_port()
            emulator_url = f"http://127.0.0.1:{emulator_port}"
            self.group.start(
                "stripe-emulator",
                [
                    sys.executable,
                    "-m",
                    "stripe_emulator",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(emulator_port),
                    "--api-key",
                    emulator_key,
                    "--state-file",
                    str(self.data_dir / "stripe-emulator.json"),
                ],
                log_path=logs / "stripe-emulator.log",
            )
            env["BILLING_STRIPE_API_KEY"] = emulator_key
            env["BILLING_STRIPE_API_BASE"] = emulator_url
            env["BILLING_SHIFTABLE_CLOCK"] = "true"
        # The local stack's receivers are on this machine (examples/webhook_receiver.py),
        # unless the setting says otherwise.
        allow_private = settings.webhook_allow_private_networks
        env["BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS"] = (
            "true" if allow_private is None else str(allow_private).lower()
        )
        database_url = settings.resolved_database_url()
        env["BILLING_DATABASE_URL"] = database_url

        from worker.db.migrate import upgrade

        upgrade(database_url)
        client_id, client_secret = self._seed()
        demo_subscription = False
        if emulator_url and emulator_key:
            wait_until(
                lambda: port_open("127.0.0.1", int(emulator_url.rsplit(":", 1)[1])),
                30,
                "stripe emulator",
            )
            try:
                self._seed_subscription(emulator_url, emulator_key)
                demo_subscription = True
            except Exception as error:  # the stack is still useful without the demo
                echo(f"warning: could not make the demo subscription: {error}")
            reachable = "127.0.0.1" if settings.api_host in ("0.0.0.0", "::") else settings.api_host
            stripe_events_url = f"http://{reachable}:{settings.api_port}/webhooks/stripe"
            try:
                self._wire_stripe_events(emulator_url, emulator_key, stripe_events_url)
            except Exception as error:  # the sweep still brings Stripe's changes in
                echo(f"warning: could not register the emulator's webhooks: {error}")

        flower_password = (
            settings.flower_password.get_secret_value()
            if settings.flower_password
            else secrets.token_urlsafe(12)
        )
        # Each exporter on the port its setting names, else on a free one.
        worker_metrics_port = settings.worker_metrics_port or free_port()
        beat_metrics_port = settings.beat_metrics_port or free_port()
        metrics_host = settings.metrics_host
        self.group.start(
            "worker",
            celery_worker_argv(
                concurrency=self.concurrency, loglevel=settings.log_level, log_format=log_format
            ),
            env={
                **env,
                **worker_metrics_env(worker_metrics_port, self.data_dir / "metrics" / "worker"),
            },
            log_path=logs / "worker.log",
        )
        self.group.start(
            "beat",
            celery_beat_argv(self.data_dir / "celerybeat-schedule", settings.log_level, log_format),
            env={**env, "BILLING_BEAT_METRICS_PORT": str(beat_metrics_port)},
            log_path=logs / "beat.log",
        )
        self.group.start(
            "api", api_argv(host, settings.api_port), env=env, log_path=logs / "api.log"
        )
        self.group.start(
            "flower",
            flower_argv(host, settings.flower_port, self.data_dir / "flower.db"),
            env={**env, **flower_env(settings.flower_user, flower_password)},
            log_path=logs / "flower.log",
        )

        api_url = f"http://{host}:{settings.api_port}"
        metrics_urls = {
            "api": f"{api_url}/metrics",
            "worker": f"http://{metrics_host}:{worker_metrics_port}/metrics",
            "beat": f"http://{metrics_host}:{beat_metrics_port}/metrics",
        }
        stack = {
            "api_url": api_url,
            "flower_url": f"http://{host}:{settings.flower_port}",
            "redis_url": redis_url,
            "database_url": database_url,
            "stripe_emulator_url": emulator_url,
            "stripe_emulator_api_key": emulator_key,
            "shiftable_clock": emulator_url is not None,
            "logs": str(logs),
            "metrics_urls": metrics_urls,
        }
        write_stack_file(settings, stack)
        wait_until(lambda: self._ready(api_url), 60, "the API (/readyz)", interval=0.2)

        echo(f"billing-worker is ready ({elapsed_since(began)})\n")
        echo(f"  API            {api_url}   (docs: {api_url}/docs)")
        echo(f"  Contracts      {api_url}/openapi.json   {api_url}/asyncapi.json (queues, events)")
        echo(
            f"  Flower         {stack['flower_url']}   user {settings.flower_user}, "
            f"password {flower_password}"
        )
        echo(f"  Redis          {redis_url}")
        echo(f"  Database       {database_url}")
        echo(f"  Stripe         {emulator_url or 'api.stripe.com (BILLING_STRIPE_API_KEY)'}")
        echo(f"  Logs           {logs}")
        echo(
            f"  Metrics        {metrics_urls['api']}   {metrics_urls['worker']} (worker)   "
            f"{metrics_urls['beat']} (beat)"
        )
        echo(f"  Client         id {client_id}   secret {client_secret}\n")
        echo("Try it:")
        echo(
            f"  curl -u {client_id}:{client_secret} -X POST -H 'Content-Type: application/json' "
            f"-d '{{}}' {api_url}/v1beta1/users/{DEMO_USER_ID}/enable\n"
        )
        echo(
            f"Create a billing account for {DEMO_UNBILLED_ORG_ID} at Stripe "
            '(with "offline": true, not at Stripe):'
        )
        echo(
            f"  curl -u {client_id}:{client_secret} -X POST -H 'Content-Type: application/json' "
            f'-H \'Idempotency-Key: acme-1\' -d \'{{"body": {{"name": "Acme Ltd", '
            f'"email": "billing@acme.example", "address": {{"country": "GB"}}, '
            f'"tax_data": [{{"type": "vat", "id": "GB123456789"}}]}}, "offline": false}}\' '
            f"{api_url}/v1beta1/organizations/{DEMO_UNBILLED_ORG_ID}/billing\n"
        )
        if demo_subscription:
            change = (
                f"{api_url}/v1beta1/organizations/{DEMO_ORG_ID}/billing/"
                f"{DEMO_BILLING_ACCOUNT_ID}/subscriptions/{DEMO_SUBSCRIPTION_ID}/change"
            )
            echo(f"Change the demo subscription ({DEMO_SUBSCRIPTION_ID}, on plan starter):")
            echo(
                f"  curl -u {client_id}:{client_secret} -X POST -H 'Content-Type: "
                f'application/json\' -d \'{{"plan_change": {{"plan": "team", '
                f'"immediate": false}}}}\' {change}'
            )
            echo(f"  billing-worker subscriptions show {DEMO_SUBSCRIPTION_ID}")
            echo("  billing-worker clock advance 31d   # beat applies the change within seconds\n")
            echo("Receive events (signed webhooks; the receiver is examples/webhook_receiver.py):")
            echo("  billing-worker webhooks add http://127.0.0.1:9999/hook   # prints its secret")
            echo("  WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py 9999\n")
            echo("The period-end burst, drained at Stripe's pace (25 calls a second):")
            echo("  billing-worker subscriptions seed-period-end 2000")
            echo("  billing-worker clock advance 31d && billing-worker stripe budget\n")
        echo("Ctrl-C stops everything.")
        return stack

    def _ready(self, api_url: str) -> bool:
        failed = self.group.exited()
        if failed:
            name, code = failed[0]
            raise SystemExit(
                f"{name} exited with {code} during start-up; see "
                f"{self.data_dir / 'logs' / (name + '.log')}"
            )
        try:
            return httpx.get(f"{api_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _seed(self) -> tuple[str, str]:
        """Demo data, made once: an organization, a disabled user and an API client."""
        from domain.errors import AlreadyExists
        from domain.organizations import NewOrganization
        from domain.permissions import ALL_SCOPES, Grant
        from domain.users import NewUser
        from tasks.handlers.organizations import create_organization
        from tasks.handlers.users import create_user
        from worker.bootstrap import build_services
        from worker.clock import SystemClock
        from worker.db.api_clients import create_client, update_client
        from worker.db.models import ApiClientRow

        svc = build_services(self.settings, clock=SystemClock())
        sessions = svc.database()
        for make in (
            lambda: create_organization(
                NewOrganization(name="demo", title="Demo Organization", id=DEMO_ORG_ID), svc
            ),
            lambda: create_organization(
                NewOrganization(name="acme", title="Acme Ltd", id=DEMO_UNBILLED_ORG_ID), svc
            ),
            lambda: create_user(
                NewUser(
                    email="demo.user@example.com",
                    name="Demo User",
                    id=DEMO_USER_ID,
                    disabled=True,
                ),
                svc,
            ),
        ):
            with contextlib.suppress(AlreadyExists):  # seeded by an earlier run
                make()
        client_id, secret, fresh = demo_credentials(self.settings)
        with sessions() as session:
            exists = session.get(ApiClientRow, client_id) is not None
        # The demo client may do everything: it is how a new user tries the system.
        everything = Grant(scopes=ALL_SCOPES)
        if fresh or not exists:
            if exists:
                with sessions.begin() as session:
                    session.delete(session.get(ApiClientRow, client_id))
            create_client(
                sessions, svc.clock, "demo", grant=everything, client_id=client_id, secret=secret
            )
        else:
            # Kept from an earlier run: it gets the scopes added since (webhooks:manage…).
            update_client(sessions, svc.clock, client_id, grant=everything)
        return client_id, secret

    def _seed_subscription(self, emulator_url: str, emulator_key: str) -> None:
        """Demo billing, made once: two plans, the demo organization's billing account
        (registered with the emulator) and a subscription to the first plan."""
        from domain.billing import BillingDetails, CreateBillingAccount
        from domain.operator_requests import CreatePlan, CreateSubscription, ListPlans
        from domain.plans import PlanSpec
        from domain.subscriptions import SubscriptionTerms
        from tasks.handlers.billing import create_billing_account
        from tasks.handlers.plans import create_plan, list_plans
        from tasks.handlers.subscribe import create_subscription
        from worker.bootstrap import build_services
        from worker.clock import SystemClock
        from worker.provider.stripe_adapter import StripeBillingProvider

        svc = build_services(
            self.settings,
            clock=SystemClock(),
            provider=StripeBillingProvider(emulator_key, api_base=emulator_url, timeout=10),
        )
        existing = {plan.name for plan in list_plans(ListPlans(), svc)}
        with svc.unit_of_work() as uow:
            subscribed = uow.subscriptions.get(DEMO_SUBSCRIPTION_ID) is not None
        for plan_id, name, title, amount in DEMO_PLANS:
            if name not in existing:
                spec = PlanSpec(name=name, title=title, amount=amount, currency="usd")
                create_plan(CreatePlan(spec, plan_id=plan_id), svc)
        if subscribed:
            return
        create_billing_account(
            CreateBillingAccount(
                command_id="demo-billing-account",
                org_id=DEMO_ORG_ID,
                billing_account_id=DEMO_BILLING_ACCOUNT_ID,
                account=BillingDetails(name="Demo Organization", email="billing@demo.example"),
            ),
            svc,
        )
        create_subscription(
            CreateSubscription(
                org_id=DEMO_ORG_ID,
                billing_account_id=DEMO_BILLING_ACCOUNT_ID,
                plan_ref=DEMO_PLANS[0][1],
                subscription_id=DEMO_SUBSCRIPTION_ID,
                # The emulator collects the demo's invoices (a card that always pays), so that
                # moving the clock by months leaves it active rather than past due on unpaid
                # invoices (`emulator payments fail` shows dunning).
                terms=SubscriptionTerms(collection_method="charge_automatically"),
            ),
            svc,
        )

    def _wire_stripe_events(self, emulator_url: str, emulator_key: str, url: str) -> None:
        """The emulator's events go to this stack's API, as Stripe's would go to a
        deployment's (`billing-worker stripe webhooks register`)."""
        from domain.operator_requests import RegisterStripeEndpoint
        from tasks.handlers.stripe_endpoints import register_stripe_endpoint
        from worker.bootstrap import build_services
        from worker.clock import SystemClock
        from worker.provider.stripe_adapter import StripeBillingProvider

        svc = build_services(
            self.settings,
            clock=SystemClock(),
            provider=StripeBillingProvider(emulator_key, api_base=emulator_url, timeout=10),
        )
        register_stripe_endpoint(RegisterStripeEndpoint(url), svc)

    def watch(self) -> bool:
        """Block until interrupted; returns False when a child died (and says which)."""
        while True:
            time.sleep(0.5)
            failed = self.group.exited()
            if failed:
                name, code = failed[0]
                print(
                    f"{name} exited with {code}; see {self.data_dir / 'logs' / name}.log",
                    file=sys.stderr,
                )
                return False

    def stop(self) -> None:
        self.group.stop()
        stack = self.settings.stack()
        if stack:
            write_stack_file(self.settings, {**stack, "stopped": True})
