"""The subscription lifecycle as users walk it, explored by Hypothesis's stateful testing: random
sequences of changes now (each at the time a preview answered), changes at the period's end,
cancels and replacements of the staged change, coupons applied and removed at Stripe behind
our back, and clocks moved across period ends, through the real HTTP API, worker, beat and
database to the Stripe emulator, on SQLite and PostgreSQL.

After each step the money holds to the cent, judged on what Stripe (the emulator) invoiced,
read through the ``stripe`` SDK, against a model of Stripe's own rule that knows nothing of
our code (:class:`PeriodModel`): every closed period costs the plan in force at its start plus
the prorations of the changes made in it, at list prices and after the discounts Stripe took
(our subscriptions itemize them: a line's amount is gross, its discount beside it), and each
preview equals what its change invoiced.

CI runs a few short sequences per backend; ``BILLING_LIFECYCLE_EXAMPLES`` and
``BILLING_LIFECYCLE_STEPS`` run more (docs/testing.md). A failing sequence is shrunk by
Hypothesis to a minimal one and printed as the steps to replay.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests read the emulator's invoices through the SDK
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan
from tests.e2e.test_period_end_billing import LEAD, move_to, stack_now, subscribe, wait_for
from tests.support.invoices import invoices_of, pay_open_invoices
from tests.support.stack import Stack, stack_of_its_own
from tests.support.subscriptions import Catalog, Subscribed, changes_of, three_plans
from worker.bootstrap import Services

pytestmark = pytest.mark.e2e

LIFECYCLE_REDIS_DB = 13
"""Redis databases 13 (SQLite) and 14 (PostgreSQL), as the other stacks whose clocks move."""
EXAMPLES = int(os.environ.get("BILLING_LIFECYCLE_EXAMPLES", "3"))
STEPS = int(os.environ.get("BILLING_LIFECYCLE_STEPS", "8"))


def percent_of(amount: int, percent: int) -> int:
    """``percent`` % of ``amount``, rounded to the minor unit, halves away from zero (a
    coupon's share of a line)."""
    magnitude = (2 * abs(amount) * percent + 100) // 200
    return magnitude if amount >= 0 else -magnitude


def prorate(amount: int, remaining: float, length: float) -> int:
    """Stripe's per-second proration of ``amount``: rounded to the minor unit, halves away
    from zero (each line on its own)."""
    if length <= 0 or remaining <= 0:
        return 0
    magnitude = (2 * abs(amount) * int(remaining) + int(length)) // (2 * int(length))
    return magnitude if amount >= 0 else -magnitude


@dataclass
class Debit:
    """What a period was debited for one stretch of it, and how much of it was credited."""

    amount: int
    start: datetime
    end: datetime
    until: datetime
    credited: int = 0
    discount: int = 0
    """What a coupon took off ``amount`` when it was debited."""
    discount_credited: int = 0


@dataclass
class PeriodModel:
    """One billing period as Stripe bills a subscription in ``flexible`` billing mode: a
    change at ``t`` credits back, of each debit still covering time after ``t``, what it
    debited for that time, and debits the new price for the rest of the period
    (https://docs.stripe.com/billing/subscriptions/billing-mode). A percent coupon takes its
    share of each debit as it is made; a credit gives back the same share of the debit's
    discount as of its amount, so it refunds what was charged for the time."""

    start: datetime
    end: datetime
    debits: list[Debit] = field(default_factory=list)

    @classmethod
    def renewed(cls, start: datetime, end: datetime, amount: int, percent: int) -> PeriodModel:
        return cls(start, end, [Debit(amount, start, end, end, 0, percent_of(amount, percent))])

    def change(self, at: datetime, amount: int, percent: int) -> tuple[int, int]:
        """The change to a price of ``amount`` at ``at``, under a ``percent`` coupon; returns
        what it invoices: (at list prices, what the coupon took)."""
        invoiced, discounted = 0, 0
        for debit in self.debits:
            since = max(at, debit.start)
            if since >= debit.until or debit.amount <= 0:
                continue
            length = (debit.end - debit.start).total_seconds()
            remaining = (debit.until - since).total_seconds()
            credit = min(prorate(debit.amount, remaining, length), debit.amount - debit.credited)
            given_back = (
                max(
                    0,
                    min(
                        prorate(debit.discount, remaining, length),
                        debit.discount - debit.discount_credited,
                    ),
                )
                if credit > 0
                else 0
            )
            debit.credited += credit
            debit.discount_credited += given_back
            debit.until = since
            invoiced -= credit
            discounted -= given_back
        length = (self.end - self.start).total_seconds()
        new = prorate(amount, (self.end - at).total_seconds(), length)
        discount = percent_of(new, percent)
        self.debits.append(Debit(new, at, self.end, self.end, 0, discount))
        return invoiced + new, discounted + discount

    @property
    def net(self) -> int:
        return sum(debit.amount - debit.credited for debit in self.debits)

    @property
    def paid(self) -> int:
        """``net`` less what coupons took."""
        return self.net - sum(debit.discount - debit.discount_credited for debit in self.debits)


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own (its clock is moved by whole periods), immediate changes invoiced
    at once whichever way they go (``always_invoice``)."""
    name = f"lifecycle_{backend}"
    redis_url = f"{redis_server}/{LIFECYCLE_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(
        name,
        workdir,
        make_database(name),
        redis_url,
        BILLING_PRORATION_BEHAVIOR="always_invoice",
    ) as system:
        system.start_worker()
        system.start_beat()
        system.start_api()
        system.client = system.new_client()
        yield system


@pytest.fixture(scope="module")
def catalog(ctx: Services) -> Catalog:
    return three_plans(ctx)


class Lifecycle(RuleBasedStateMachine):
    """One subscription, on starter at first, walked by random steps."""

    stack: Stack
    api: httpx.Client
    ctx: Services
    sdk: stripe.StripeClient
    plans: tuple[Plan, ...]

    def __init__(self) -> None:
        super().__init__()
        self.sub: Subscribed = subscribe(self.ctx, self.plans[0])
        pay_open_invoices(self.sdk, self.sub.provider_id)
        item = self._item()
        self.plan = self.plans[0]
        self.staged: Plan | None = None
        self.percent_off = 0
        """The percent coupon on the subscription at Stripe (0: none)."""
        self.period = PeriodModel.renewed(
            datetime.fromtimestamp(item["current_period_start"], UTC),
            datetime.fromtimestamp(item["current_period_end"], UTC),
            self.plan.amount,
            0,
        )
        self.closed: list[PeriodModel] = []

    def _item(self) -> Any:
        return self.sdk.v1.subscriptions.retrieve(self.sub.provider_id)["items"].data[0]

    def _change(self, body: dict[str, Any]) -> httpx.Response:
        return self.api.post(self.sub.change_url, json=body)

    @rule(to=st.integers(0, 2))
    def change_now_at_a_previews_time(self, to: int) -> None:
        plan = self.plans[to]
        if plan.id == self.plan.id:
            refused = self._change({"plan_change": {"plan": plan.name, "immediate": True}})
            assert refused.status_code == 400, refused.text
            return
        preview = self.api.post(f"{self.sub.change_url}/preview", json={"plan": plan.name})
        assert preview.status_code == 200, preview.text
        answered = preview.json()
        before = {invoice.id for invoice in invoices_of(self.sdk, self.sub.provider_id)}

        made = self._change(
            {
                "plan_change": {
                    "plan": plan.name,
                    "immediate": True,
                    "proration_date": answered["proration_date"],
                }
            }
        )

        assert made.status_code == 200, made.text
        at = datetime.fromisoformat(answered["proration_date"])
        expected, discounted = self.period.change(at, plan.amount, self.percent_off)
        [invoice] = [
            invoice
            for invoice in invoices_of(self.sdk, self.sub.provider_id)
            if invoice.id not in before
        ]
        billed = (sum(line.amount for line in invoice.lines), invoice.total)
        previewed = (answered["subtotal"], answered["total"])
        assert billed == previewed == (expected, expected - discounted), (invoice, answered)
        self.plan, self.staged = plan, None  # a change now supersedes a staged one
        pay_open_invoices(self.sdk, self.sub.provider_id)

    @rule(to=st.integers(0, 2))
    def change_at_the_period_end(self, to: int) -> None:
        plan = self.plans[to]
        made = self._change({"plan_change": {"plan": plan.name, "immediate": False}})
        if plan.id == self.plan.id:
            assert made.status_code == 400, made.text
            return
        assert made.status_code == 200, made.text
        self.staged = plan  # a second one replaces the first

    @rule(hours=st.integers(1, 24 * 20), seconds=st.integers(0, 3599))
    def let_time_pass_within_the_period(self, hours: int, seconds: int) -> None:
        """Days go by before the next step (never into the period end's lead, where a change
        at the period's end is staged: crossing it is its own step)."""
        moment = stack_now(self.stack) + timedelta(hours=hours, seconds=seconds)
        if moment < self.period.end - 2 * LEAD:
            move_to(self.stack, moment)

    @rule(percent=st.sampled_from((0, 10, 25, 50)))
    def put_a_coupon_on_it_at_stripe(self, percent: int) -> None:
        """Someone, in Stripe's dashboard, replaces the subscription's coupon (0: removes
        it): the periods and changes from then on are billed less."""
        if percent:
            coupon = self.sdk.v1.coupons.create(
                params={"percent_off": percent, "duration": "forever"}
            )
            discounts: Any = [{"coupon": str(coupon.id)}]
        else:
            discounts = ""
        self.sdk.v1.subscriptions.update(self.sub.provider_id, params={"discounts": discounts})
        self.percent_off = percent

    @precondition(lambda self: self.staged is not None)
    @rule()
    def cancel_the_staged_change(self) -> None:
        made = self._change({"phase_change": {"cancel_upcoming_changes": True}})
        assert made.status_code == 200, made.text
        self.staged = None

    @rule()
    def cross_the_period_end(self) -> None:
        boundary = self.period.end
        pending = [
            change for change in changes_of(self.stack, self.sub.id) if change.state.is_pending
        ]
        assert len(pending) == (self.staged is not None), pending
        if pending:
            [change] = pending
            move_to(self.stack, boundary - LEAD / 2)
            wait_for(self.stack, change, ChangeState.STAGED)
            move_to(self.stack, boundary + timedelta(seconds=1))
            wait_for(self.stack, change, ChangeState.APPLIED)
        else:
            move_to(self.stack, boundary + timedelta(seconds=1))
        self.plan = self.staged or self.plan
        self.staged = None
        item = self._item()
        assert datetime.fromtimestamp(item["current_period_start"], UTC) == boundary
        assert item["price"]["id"] == self.plan.provider_price_id
        self.closed.append(self.period)
        self.period = PeriodModel.renewed(
            boundary,
            datetime.fromtimestamp(item["current_period_end"], UTC),
            self.plan.amount,
            self.percent_off,
        )
        pay_open_invoices(self.sdk, self.sub.provider_id)

    @invariant()
    def every_closed_period_costs_its_plans_to_the_cent(self) -> None:
        if not self.closed:
            return
        lines = [
            line
            for invoice in invoices_of(self.sdk, self.sub.provider_id)
            if invoice.status != "void"
            for line in invoice.lines
        ]
        billed = [
            (
                sum(line.amount for line in lines if period.start <= line.start < period.end),
                sum(
                    line.amount - line.discount
                    for line in lines
                    if period.start <= line.start < period.end
                ),
            )
            for period in self.closed
        ]
        assert billed == [(period.net, period.paid) for period in self.closed]


@pytest.mark.timeout(60 + EXAMPLES * STEPS * 5)  # a step takes a few seconds at most
def test_random_walks_of_a_subscription_bill_what_stripe_s_rule_says_to_the_cent(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    Lifecycle.stack, Lifecycle.api, Lifecycle.ctx, Lifecycle.sdk = stack, api, ctx, sdk
    Lifecycle.plans = (catalog.starter, catalog.team, catalog.scale)
    run_state_machine_as_test(
        Lifecycle,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_a_walk_with_coupons_put_on_and_taken_off_at_stripe_bills_to_the_cent(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    """One walk through the coupon's steps every time (the random walks above meet them only
    in longer runs): a change now and a renewal under a coupon, another coupon, none."""
    Lifecycle.stack, Lifecycle.api, Lifecycle.ctx, Lifecycle.sdk = stack, api, ctx, sdk
    Lifecycle.plans = (catalog.starter, catalog.team, catalog.scale)
    walk = Lifecycle()

    walk.put_a_coupon_on_it_at_stripe(25)
    walk.let_time_pass_within_the_period(24 * 6, 17)
    walk.change_now_at_a_previews_time(1)
    walk.cross_the_period_end()
    walk.every_closed_period_costs_its_plans_to_the_cent()
    walk.put_a_coupon_on_it_at_stripe(10)
    walk.let_time_pass_within_the_period(24 * 11, 1201)
    walk.change_now_at_a_previews_time(2)
    walk.put_a_coupon_on_it_at_stripe(0)
    walk.change_at_the_period_end(0)
    walk.cross_the_period_end()
    walk.every_closed_period_costs_its_plans_to_the_cent()
