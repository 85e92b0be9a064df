"""A period as Stripe billed it, read from a subscription's invoices: which invoice renewed it,
which line is its charge, and which proration lines correct it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.renewals import (
    CORRECTION_SLACK,
    BilledInvoice,
    latest_renewal,
    renewal_of_period,
)

DEC = datetime(2026, 12, 1, tzinfo=UTC)
JAN = datetime(2027, 1, 1, tzinfo=UTC)
FEB = datetime(2027, 2, 1, tzinfo=UTC)


def line(
    amount: int,
    start: datetime,
    end: datetime,
    price: str | None = "price_team",
    *,
    proration: bool = False,
) -> PreviewLine:
    return PreviewLine("", amount, proration, start, end, price)


def invoice(
    invoice_id: str,
    created: datetime,
    *lines: PreviewLine,
    reason: str | None = "subscription_cycle",
    status: str = "paid",
    currency: str = "usd",
) -> BilledInvoice:
    return BilledInvoice(invoice_id, status, reason, currency, created, lines)


def test_the_latest_renewal_is_the_newest_renewal_whatever_order_the_invoices_come_in() -> None:
    january = invoice("in_jan", JAN, line(2900, JAN, FEB))
    december = invoice("in_dec", DEC, line(900, DEC, JAN, "price_starter"))
    correction = invoice("in_fix", JAN + timedelta(hours=2), reason="subscription_update")

    period = latest_renewal([january, december, correction])

    assert period is not None
    assert (period.renewal.id, period.start, period.net) == ("in_jan", JAN, 2900)


def test_of_two_renewals_made_the_same_second_the_later_id_is_the_latest() -> None:
    first = invoice("in_a", JAN, line(900, JAN, FEB, "price_starter"))
    second = invoice("in_b", JAN, line(2900, JAN, FEB))

    for invoices in ([first, second], [second, first]):
        period = latest_renewal(invoices)
        assert period is not None
        assert period.renewal.id == "in_b"


def test_a_void_renewal_or_an_invoice_made_for_another_reason_renews_nothing() -> None:
    void = invoice("in_void", JAN, line(2900, JAN, FEB), status="void")
    update = invoice("in_upd", JAN, line(2900, JAN, FEB), reason="subscription_update")

    assert latest_renewal([void, update]) is None
    assert latest_renewal([]) is None


def test_a_renewals_charge_is_its_line_for_the_newest_period() -> None:
    renewal = invoice(
        "in_jan",
        JAN,
        line(900, DEC, JAN, "price_starter"),  # a usage line of the period that ended
        line(2900, JAN, FEB),
        line(-100, JAN, FEB, proration=True),
    )

    period = latest_renewal([renewal])

    assert period is not None
    assert (period.charge.amount, period.charge.price_id) == (2900, "price_team")
    assert period.net == 2800


def test_a_period_is_corrected_by_prorations_starting_within_a_minute_of_its_start() -> None:
    renewal = invoice("in_jan", JAN, line(900, JAN, FEB, "price_starter"))
    at_the_limit = invoice(
        "in_fix",
        JAN + timedelta(hours=1),
        line(-900, JAN + CORRECTION_SLACK, FEB, "price_starter", proration=True),
        line(2900, JAN + CORRECTION_SLACK, FEB, proration=True),
    )
    too_late = invoice(
        "in_late",
        JAN + timedelta(days=3),
        line(500, JAN + CORRECTION_SLACK + timedelta(seconds=1), FEB, proration=True),
    )

    period = renewal_of_period([renewal, at_the_limit, too_late], JAN)

    assert period is not None
    assert period.net == 2900
    assert len(period.corrections) == 2


def test_prorations_of_a_void_invoice_or_in_another_currency_correct_nothing() -> None:
    renewal = invoice("in_jan", JAN, line(900, JAN, FEB, "price_starter"))
    void = invoice("in_void", JAN, line(2000, JAN, FEB, proration=True), reason=None, status="void")
    euros = invoice(
        "in_eur", JAN, line(2000, JAN, FEB, proration=True), reason=None, currency="eur"
    )

    period = renewal_of_period([renewal, void, euros], JAN)

    assert period is not None
    assert (period.net, period.corrections) == (900, ())


def test_the_renewal_of_a_period_is_found_among_others_and_none_when_missing() -> None:
    december = invoice("in_dec", DEC, line(900, DEC, JAN, "price_starter"))
    january = invoice("in_jan", JAN, line(2900, JAN, FEB))

    found = renewal_of_period([january, december], DEC)

    assert found is not None
    assert found.renewal.id == "in_dec"
    assert renewal_of_period([january, december], FEB) is None
    assert renewal_of_period([invoice("in_x", JAN, line(5, JAN, FEB, proration=True))], JAN) is None


def test_a_renewal_line_without_a_price_is_shown_as_such() -> None:
    period = latest_renewal([invoice("in_jan", JAN, line(2900, JAN, FEB, None))])

    assert period is not None
    assert period.shown() == (
        "the renewal of 2027-01-01T00:00:00+00:00 (invoice in_jan) billed 29.00 USD "
        "(no price), no correction: 29.00 USD for the period"
    )
