"""Money reads the same on the command line and in the console: one function
(``domain.billing.currencies.format_amount``) shows every amount in its currency's own
decimals, a zero-decimal currency's (JPY) without any, never in minor units."""

from __future__ import annotations

from datetime import UTC, datetime

from domain.operations.console import InvoiceLineView, InvoiceView, PhaseView, SubscriptionStory
from worker.api.console.subscriptions import subscription_body
from worker.cli.stories import subscription_text

START = datetime(2026, 11, 1, tzinfo=UTC)
END = datetime(2026, 12, 1, tzinfo=UTC)


def invoice(id_: str, currency: str, amount: int) -> InvoiceView:
    return InvoiceView(
        id=id_,
        status="paid",
        number="0001",
        currency=currency,
        amount_due=amount,
        amount_paid=amount,
        billing_reason="subscription_create",
        created=START,
        period_start=START,
        period_end=END,
        lines=[
            InvoiceLineView(
                description="Team (at ¥150,000 / month)",
                amount=amount,
                proration=False,
                period_start=START,
                period_end=END,
                price_id="price_team",
            )
        ],
    )


def story(currency: str, amount: int) -> SubscriptionStory:
    return SubscriptionStory(
        subscription={
            "id": "sub_1",
            "billing_account_id": "ba_1",
            "plan_id": "pln_team",
            "plan": {"name": "team"},
            "state": "active",
            "provider_id": "sub_stripe",
            "current_period_start": START.isoformat(),
            "current_period_end": END.isoformat(),
        },
        phases=[PhaseView(effective_at=START, plan_id="pln_team", source="current")],
        changes=[],
        invoices=[invoice("in_1", currency, amount)],
        next_invoice=invoice("upcoming_in_1", currency, amount),
        commands=[],
        provider_calls=[],
        events=[],
    )


def test_a_yen_invoice_shows_whole_yen_on_the_command_line_and_in_the_console() -> None:
    shown = story("jpy", 150_000)

    printed = subscription_text(shown)
    page = subscription_body(shown)

    assert "150,000 JPY" in printed
    assert "150,000 JPY" in page
    assert "1,500.00" not in printed + page  # not read as cents
    assert "150000 jpy" not in printed


def test_a_dollar_invoice_shows_dollars_and_cents_not_cents_on_the_command_line() -> None:
    shown = story("usd", 2000)

    printed = subscription_text(shown)

    assert "20.00 USD" in printed
    assert "2000 usd" not in printed
    assert "20.00 USD" in subscription_body(shown)


def test_what_stripe_takes_off_and_what_the_customer_must_pay_show_on_both_sides() -> None:
    shown = story("usd", 2000)
    shown.subscription.update(
        billed_discount='25 % off, forever (coupon GOODWILL "Goodwill")',
        provider_schedule_id="sub_sched_1",
    )
    [first] = shown.invoices or []
    discounted = first.model_copy(
        update={
            "total_discount": 500,
            "credited": 300,
            "lines": [first.lines[0].model_copy(update={"discount": 500})],
        }
    )
    shown = shown.model_copy(
        update={
            "invoices": [discounted],
            "changes": [
                {
                    "id": "chg_1",
                    "kind": "immediate",
                    "state": "awaiting_payment",
                    "from_plan_id": "pln_starter",
                    "plan_id": "pln_team",
                    "effective_at": START.isoformat(),
                    "applied_at": None,
                    "apply_lag_seconds": None,
                    "reason": "",
                    "payment_url": "https://invoice.example/pay/in_2",
                    "payment_expires_at": END.isoformat(),
                }
            ],
        }
    )

    printed = subscription_text(shown)
    page = subscription_body(shown)

    assert '25 % off, forever (coupon GOODWILL "Goodwill") (at Stripe)' in printed
    assert "sub_sched_1 (at Stripe: plan changes refused)" in printed
    assert "chg_1 waits for the customer's payment until 2026-12-01 00:00:00: " in printed
    assert "https://invoice.example/pay/in_2" in printed
    assert "Discount at Stripe" in page
    assert "Schedule at Stripe" in page
    assert '<a href="https://invoice.example/pay/in_2">' in page
    assert "<dt>Discounts</dt><dd>5.00 USD</dd>" in page.replace("&nbsp;", " ")
    assert "<dt>Credit notes</dt><dd>3.00 USD</dd>" in page.replace("&nbsp;", " ")
