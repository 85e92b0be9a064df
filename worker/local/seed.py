"""The local stack's demo data: declared once here (:data:`DEMO_DATA`), made by ``up`` (each
record only when missing, so every ``up`` may run it), listed by ``up``'s banner and by
``billing-worker demo``.

The demo client's secret is kept in the data directory (``demo-client.json``) so that ``up``
can print it; :func:`seed_demo_client` makes sure the printed secret is the one that
authenticates (see its docstring).
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from worker.local.stack_state import read_stack
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.bootstrap import Services

DEMO_CLIENT_FILE = "demo-client.json"
DEMO_CLIENT_ID = "demo"
DEMO_ORG_ID = "org_demo"
DEMO_USER_ID = "usr_demo"
DEMO_BILLING_ACCOUNT_ID = "ba_demo"
DEMO_SUBSCRIPTION_ID = "sub_demo"
DEMO_UNBILLED_ORG_ID = "org_acme"
"""An organization without a billing account, to try creating one."""


@dataclass(frozen=True)
class DemoPlan:
    id: str
    name: str
    title: str
    amount: int
    """Cents a month, in US dollars."""


DEMO_PLANS = (
    DemoPlan("plan_starter", "starter", "Starter", 900),
    DemoPlan("plan_team", "team", "Team", 2900),
)


@dataclass(frozen=True)
class DemoRecord:
    """One record of the demo data, as the banner and the docs show it."""

    kind: str
    id: str
    what: str
    needs_stripe: bool = False
    """Made only when ``up`` runs the Stripe emulator (it registers with the provider)."""

    def to_view(self) -> dict[str, Any]:
        return asdict(self)


DEMO_DATA: tuple[DemoRecord, ...] = (
    DemoRecord("organization", DEMO_ORG_ID, "demo: Demo Organization, with a billing account"),
    DemoRecord("organization", DEMO_UNBILLED_ORG_ID, "acme: Acme Ltd, no billing account yet"),
    DemoRecord("user", DEMO_USER_ID, "demo.user@example.com, disabled (enable it)"),
    *(
        DemoRecord("plan", plan.id, f"{plan.name}: {plan.amount / 100:.2f} USD a month", True)
        for plan in DEMO_PLANS
    ),
    DemoRecord(
        "billing account", DEMO_BILLING_ACCOUNT_ID, f"{DEMO_ORG_ID}'s, at Stripe (emulator)", True
    ),
    DemoRecord(
        "subscription",
        DEMO_SUBSCRIPTION_ID,
        f"{DEMO_BILLING_ACCOUNT_ID} on plan {DEMO_PLANS[0].name}, paid by card",
        True,
    ),
    DemoRecord("API client", DEMO_CLIENT_ID, "every scope, every organization"),
)
"""Everything ``up`` seeds, in the order it is listed."""


@dataclass(frozen=True)
class DemoCredentials:
    client_id: str
    client_secret: str


def saved_demo_credentials(settings: Settings) -> DemoCredentials | None:
    """The demo client's id and secret as the data directory keeps them, if it does."""
    try:
        saved = json.loads((settings.data_dir / DEMO_CLIENT_FILE).read_text())
        return DemoCredentials(str(saved["client_id"]), str(saved["client_secret"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_demo_credentials(settings: Settings, credentials: DemoCredentials) -> None:
    path = settings.data_dir / DEMO_CLIENT_FILE
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(json.dumps(asdict(credentials)))


def remember_rotated_demo_secret(settings: Settings, client_id: str, secret: str) -> bool:
    """After ``clients rotate-secret``: when ``client_id`` is the demo client this data
    directory keeps, in the database its stack uses, keep its new ``secret`` instead, so that
    ``demo`` and the next ``up`` print the live secret, never the withdrawn one. Whether it
    was."""
    saved = saved_demo_credentials(settings)
    used = settings.resolved_database_url()
    if saved is None or saved.client_id != client_id:
        return False
    if read_stack(settings.data_dir).get("database_url", used) != used:
        return False  # another database's client of the same id: not the demo's
    _save_demo_credentials(settings, DemoCredentials(client_id, secret))
    return True


def seed_records(svc: Services) -> None:
    """The organizations and the user, each made unless it exists."""
    from application.handlers.billing.organizations import create_organization
    from application.handlers.users import create_user
    from domain.billing.organizations import NewOrganization
    from domain.errors import AlreadyExists
    from domain.users import NewUser

    for make in (
        lambda: create_organization(
            NewOrganization(name="demo", title="Demo Organization", id=DEMO_ORG_ID), svc
        ),
        lambda: create_organization(
            NewOrganization(name="acme", title="Acme Ltd", id=DEMO_UNBILLED_ORG_ID), svc
        ),
        lambda: create_user(
            NewUser(
                email="demo.user@example.com", name="Demo User", id=DEMO_USER_ID, disabled=True
            ),
            svc,
        ),
    ):
        with contextlib.suppress(AlreadyExists):  # seeded by an earlier run
            make()


def seed_demo_client(settings: Settings, svc: Services) -> DemoCredentials:
    """The demo client, with every scope, whose secret is the one the data directory keeps
    and ``up`` prints.

    The client is made with a new secret when missing. ``clients rotate-secret demo`` keeps
    the new secret here (:func:`remember_rotated_demo_secret`). When the secret kept no longer
    authenticates all the same (the database was replaced, or rotated from elsewhere), the
    client gets a *new* secret, saved and printed, rather than the kept one back: a rotation
    is how an operator withdraws a secret that was shown somewhere, and ``up`` must not undo
    it. A disabled demo client is enabled again, as it exists to be
    used.
    """
    from adapters.db.api_clients import (
        create_client,
        get_client,
        rotate_secret,
        secret_authenticates,
        update_client,
    )
    from adapters.db.models import ApiClientRow
    from domain.permissions import ALL_SCOPES, Grant

    sessions = svc.database()
    # The demo client may do everything: it is how a new user tries the system.
    everything = Grant(scopes=ALL_SCOPES)
    saved = saved_demo_credentials(settings)
    client_id = saved.client_id if saved else DEMO_CLIENT_ID
    with sessions() as session:
        exists = session.get(ApiClientRow, client_id) is not None
    if not exists:
        secret = secrets.token_urlsafe(24)
        create_client(
            sessions, svc.clock, "demo", grant=everything, client_id=client_id, secret=secret
        )
        credentials = DemoCredentials(client_id, secret)
        _save_demo_credentials(settings, credentials)
        return credentials
    # Kept from an earlier run: it gets the scopes added since (webhooks:manage…).
    update_client(
        sessions,
        svc.clock,
        client_id,
        grant=everything,
        enabled=True if not get_client(sessions, client_id).enabled else None,
    )
    if saved is not None and secret_authenticates(sessions, client_id, saved.client_secret):
        return saved
    credentials = DemoCredentials(client_id, rotate_secret(sessions, svc.clock, client_id).secret)
    _save_demo_credentials(settings, credentials)
    return credentials


def seed_billing(svc: Services) -> None:
    """Demo billing, made once: two plans, the demo organization's billing account
    (registered with the provider ``svc`` names: the emulator) and a subscription to the first
    plan."""
    from application.handlers.billing.accounts import create_billing_account
    from application.handlers.subscriptions.plans import create_plan, list_plans
    from application.handlers.subscriptions.subscribe import create_subscription
    from application.requests.operator_requests import CreatePlan, CreateSubscription, ListPlans
    from domain.billing.account_commands import CreateBillingAccount
    from domain.billing.account_details import BillingDetails
    from domain.subscriptions.plans import PlanSpec
    from domain.subscriptions.subscription import SubscriptionTerms

    existing = {plan.name for plan in list_plans(ListPlans(), svc)}
    with svc.unit_of_work() as uow:
        subscribed = uow.subscriptions.get(DEMO_SUBSCRIPTION_ID) is not None
    for plan in DEMO_PLANS:
        if plan.name not in existing:
            spec = PlanSpec(name=plan.name, title=plan.title, amount=plan.amount, currency="usd")
            create_plan(CreatePlan(spec, plan_id=plan.id), svc)
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
            plan_ref=DEMO_PLANS[0].name,
            subscription_id=DEMO_SUBSCRIPTION_ID,
            # The emulator collects the demo's invoices (a card that always pays), so that
            # moving the clock by months leaves it active rather than past due on unpaid
            # invoices (`emulator payments fail` shows dunning).
            terms=SubscriptionTerms(collection_method="charge_automatically"),
        ),
        svc,
    )


def wire_stripe_events(svc: Services, url: str) -> None:
    """The emulator's events go to this stack's API, as Stripe's would go to a deployment's
    (`billing-worker stripe webhooks register`)."""
    from application.handlers.provider.stripe_endpoints import register_stripe_endpoint
    from application.requests.operator_requests import RegisterStripeEndpoint

    register_stripe_endpoint(RegisterStripeEndpoint(url), svc)
