"""The independent checker sees each anomaly it is there for (issue 43, item 4): a clean run is
clean, and one anomaly of each kind planted in it is reported, by kind, naming its subject.
A checker made blind to a kind fails the test of that kind."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.checker import (
    Accepted,
    Anomaly,
    AnomalyKind,
    BilledPeriod,
    Observed,
    PreviewAnswered,
    PriceSpan,
    check,
    expected_net,
    report,
)

START = datetime(2026, 11, 1, tzinfo=UTC)
END = START + timedelta(days=30)
STARTER, TEAM = 900, 2900


def clean_run() -> Observed:
    """Two accounts registered, a user enabled, a change at the period's end and one made at
    once mid-period, a preview that matched: every check passes."""
    return Observed(
        accepted=[
            Accepted("c-acme", (("customer", "org_acme"),)),
            Accepted("c-globex", (("customer", "org_globex"),)),
            Accepted("c-user", ()),
            Accepted("c-end", (("subscription_write", "chg_end:apply"),)),
            Accepted("c-now", (("subscription_write", "chg_now:apply"),)),
        ],
        statuses={
            "c-acme": "succeeded",
            "c-globex": "succeeded",
            "c-user": "succeeded",
            "c-end": "succeeded",
            "c-now": "rejected",
        },
        executed=[
            ("customer", "org_acme"),
            ("customer", "org_globex"),
            ("subscription_write", "chg_end:apply"),
            ("subscription_write", "chg_now:apply"),
        ],
        prices={
            "sub_a": [PriceSpan(START - timedelta(days=30), STARTER), PriceSpan(START, TEAM)],
            "sub_b": [PriceSpan(START, STARTER), PriceSpan(START + timedelta(days=15), TEAM)],
        },
        periods=[
            BilledPeriod("sub_a", START, END, TEAM),
            BilledPeriod("sub_b", START, END, STARTER + 1450 - 450),
        ],
        previews=[PreviewAnswered("prv_1", 1000, 1000), PreviewAnswered("prv_2", 700, None)],
        our_rows={"sub_a": {"price": "price_team"}, "org_acme": {"customer": "cus_1"}},
        stripe_objects={"sub_a": {"price": "price_team"}, "org_acme": {"customer": "cus_1"}},
        events_expected={"plan_changed:chg_end", "plan_changed:chg_now"},
        events_delivered=[
            ("evt_1", "plan_changed:chg_end"),
            ("evt_1", "plan_changed:chg_end"),  # redelivered under its id: allowed
            ("evt_2", "plan_changed:chg_now"),
        ],
    )


def kinds(anomalies: list[Anomaly]) -> list[tuple[AnomalyKind, str]]:
    return [(anomaly.kind, anomaly.subject) for anomaly in anomalies]


def test_a_clean_run_has_no_anomalies() -> None:
    assert check(clean_run()) == []
    assert report([]) == "no anomalies"


def test_an_accepted_command_whose_customer_stripe_never_made_is_lost() -> None:
    run = clean_run()
    run.executed.remove(("customer", "org_globex"))

    assert kinds(check(run)) == [(AnomalyKind.LOST, "c-globex")]


def test_a_second_customer_for_one_organization_is_doubled() -> None:
    run = clean_run()
    run.executed.append(("customer", "org_acme"))

    [anomaly] = check(run)
    assert (anomaly.kind, anomaly.subject) == (AnomalyKind.DOUBLED, "org_acme")
    assert "2 times" in anomaly.detail


def test_a_change_written_twice_at_stripe_is_doubled_even_if_nobody_asked_for_it() -> None:
    run = clean_run()
    run.executed += [("subscription_write", "chg_ghost:apply")] * 2

    assert kinds(check(run)) == [(AnomalyKind.DOUBLED, "chg_ghost:apply")]


def test_a_period_billed_a_cent_off_is_misbilled() -> None:
    run = clean_run()
    run.periods[0] = replace(run.periods[0], net=TEAM - 1)

    [anomaly] = check(run)
    assert (anomaly.kind, anomaly.subject) == (AnomalyKind.MISBILLED, f"sub_a@{START.isoformat()}")
    assert anomaly.detail == "billed 2899 net, the plans in force cost 2900"


def test_a_period_billed_at_the_old_price_after_a_period_end_change_is_misbilled() -> None:
    run = clean_run()
    run.periods[0] = replace(run.periods[0], net=STARTER)

    assert kinds(check(run)) == [(AnomalyKind.MISBILLED, f"sub_a@{START.isoformat()}")]


def test_a_mid_period_change_costs_stripes_two_rounded_proration_lines() -> None:
    third = START + timedelta(days=10)  # two thirds of the period left: 1933.33 and 600

    assert expected_net(START, END, [PriceSpan(START, STARTER), PriceSpan(third, TEAM)]) == (
        STARTER + 1933 - 600
    )
    assert expected_net(START, END, [PriceSpan(END, TEAM)]) == 0  # nothing in force yet


def test_a_preview_that_differs_from_its_invoice_is_reported() -> None:
    run = clean_run()
    run.previews[0] = replace(run.previews[0], invoiced=999)

    assert kinds(check(run)) == [(AnomalyKind.PREVIEW_MISMATCH, "prv_1")]


@pytest.mark.parametrize(
    ("ours", "detail"),
    [
        ({"price": "price_starter"}, "price: ours 'price_starter', Stripe's 'price_team'"),
        (None, "at Stripe only"),
    ],
)
def test_a_row_that_differs_from_stripes_object_is_stale(
    ours: dict[str, object] | None, detail: str
) -> None:
    run = clean_run()
    if ours is None:
        del run.our_rows["sub_a"]
    else:
        run.our_rows["sub_a"] = ours

    [anomaly] = check(run)
    assert (anomaly.kind, anomaly.subject, anomaly.detail) == (
        AnomalyKind.STALE_ROW,
        "sub_a",
        detail,
    )


def test_an_event_emitted_twice_under_two_ids_is_reported() -> None:
    run = clean_run()
    run.events_delivered.append(("evt_3", "plan_changed:chg_now"))

    assert kinds(check(run)) == [(AnomalyKind.EVENT_TWICE, "plan_changed:chg_now")]


def test_an_event_never_delivered_is_reported() -> None:
    run = clean_run()
    run.events_delivered = [d for d in run.events_delivered if d[1] != "plan_changed:chg_now"]

    assert kinds(check(run)) == [(AnomalyKind.EVENT_NEVER, "plan_changed:chg_now")]


@pytest.mark.parametrize("status", ["queued", "running", "retrying", "waiting", "unknown"])
def test_a_command_not_finished_after_quiescence_is_unfinished(status: str) -> None:
    run = clean_run()
    if status == "unknown":
        del run.statuses["c-user"]
    else:
        run.statuses["c-user"] = status

    [anomaly] = check(run)
    assert (anomaly.kind, anomaly.subject) == (AnomalyKind.UNFINISHED, "c-user")


def test_the_report_counts_anomalies_by_kind_then_lists_each() -> None:
    run = clean_run()
    run.executed.remove(("customer", "org_globex"))
    run.statuses["c-user"] = "running"

    assert report(check(run)).splitlines() == [
        "lost: 1, unfinished: 1",
        "  lost: c-globex: customer org_globex never made",
        "  unfinished: c-user: status 'running'",
    ]


def _lose(run: Observed) -> None:
    run.executed.remove(("customer", "org_globex"))


def _double(run: Observed) -> None:
    run.executed.append(("subscription_write", "chg_end:apply"))


def _misbill(run: Observed) -> None:
    run.periods[1] = replace(run.periods[1], net=run.periods[1].net + 1)


def _mispreview(run: Observed) -> None:
    run.previews[0] = replace(run.previews[0], invoiced=0)


def _stale(run: Observed) -> None:
    run.our_rows["org_acme"] = {"customer": "cus_other"}


def _emit_twice(run: Observed) -> None:
    run.events_delivered.append(("evt_9", "plan_changed:chg_end"))


def _never_emit(run: Observed) -> None:
    run.events_expected.add("plan_changed:chg_other")


def _leave_running(run: Observed) -> None:
    run.statuses["c-acme"] = "running"


PLANTED = {
    AnomalyKind.LOST: _lose,
    AnomalyKind.DOUBLED: _double,
    AnomalyKind.MISBILLED: _misbill,
    AnomalyKind.PREVIEW_MISMATCH: _mispreview,
    AnomalyKind.STALE_ROW: _stale,
    AnomalyKind.EVENT_TWICE: _emit_twice,
    AnomalyKind.EVENT_NEVER: _never_emit,
    AnomalyKind.UNFINISHED: _leave_running,
}


def test_every_kind_of_anomaly_has_a_planted_example() -> None:
    assert set(PLANTED) == set(AnomalyKind)


@pytest.mark.parametrize("kind", list(AnomalyKind))
def test_the_checker_finds_one_planted_anomaly_of_each_kind_and_nothing_else(
    kind: AnomalyKind,
) -> None:
    run = clean_run()
    PLANTED[kind](run)

    assert [anomaly.kind for anomaly in check(run)] == [kind]
