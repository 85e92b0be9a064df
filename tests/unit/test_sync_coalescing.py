"""The ids a sync of one Stripe object takes, and when an event needs no read (pure rules;
the webhook route's use of them runs on real parts in tests/chaos/test_stripe_event_storm.py)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from domain.messages import is_id
from domain.provider.sync import (
    COMMAND_ID_LENGTH,
    EVENT_CREATED_AHEAD_LIMIT,
    GENERATIONS_AFTER_A_READ,
    STRIPE_CLOCK_MARGIN,
    SyncStripeObject,
    created_too_far_ahead,
    read_since,
)

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def test_the_syncs_of_an_object_read_before_count_from_its_last_read_then_from_now() -> None:
    last_read = NOW - timedelta(minutes=5)
    ids = list(
        itertools.islice(
            SyncStripeObject.command_ids_for("subscription", "sub_1", last_read, NOW),
            GENERATIONS_AFTER_A_READ + 2,
        )
    )

    first = int(last_read.timestamp())
    name = "stripe:subscription:sub_1"
    assert ids[:2] == [f"{name}:{first}", f"{name}:{first + 1}"]
    assert ids[GENERATIONS_AFTER_A_READ:] == [
        f"stripe:subscription:sub_1:{int(NOW.timestamp())}",
        f"stripe:subscription:sub_1:{int(NOW.timestamp()) + 1}",
    ]
    assert len(set(ids)) == len(ids)


def test_an_object_not_ours_counts_from_now() -> None:
    first = next(SyncStripeObject.command_ids_for("customer", "cus_1", None, NOW))

    assert first == f"stripe:customer:cus_1:{int(NOW.timestamp())}"


def test_an_object_id_too_long_for_a_command_id_is_hashed_into_a_valid_one() -> None:
    long_id = "sub_" + "x" * 124
    ids = SyncStripeObject.command_ids_for("subscription", long_id, NOW, NOW)
    other = SyncStripeObject.command_ids_for("subscription", long_id[:-1] + "y", NOW, NOW)

    first = next(ids)
    assert len(first) <= COMMAND_ID_LENGTH
    assert is_id(first, COMMAND_ID_LENGTH)
    assert first != next(other)


def test_an_event_needs_no_read_only_when_a_read_began_clearly_after_it() -> None:
    created = NOW - timedelta(minutes=10)

    assert read_since(created, NOW)
    assert not read_since(created, None)  # never read
    assert not read_since(NOW, NOW)  # the same second: the read may predate the change
    # Within the margin for the two clocks: read again.
    assert not read_since(created, created + STRIPE_CLOCK_MARGIN)
    assert read_since(created, created + STRIPE_CLOCK_MARGIN + timedelta(seconds=1))


def test_an_event_dated_ahead_of_our_clock_is_believed_up_to_ten_minutes() -> None:
    # Stripe's signature tolerance (5 minutes), and as much again for the clocks to differ.
    assert timedelta(minutes=10) == EVENT_CREATED_AHEAD_LIMIT
    assert not created_too_far_ahead(NOW + EVENT_CREATED_AHEAD_LIMIT, NOW)
    assert created_too_far_ahead(NOW + EVENT_CREATED_AHEAD_LIMIT + timedelta(seconds=1), NOW)
    assert created_too_far_ahead(NOW + timedelta(days=3650), NOW)
    assert not created_too_far_ahead(NOW - timedelta(days=3650), NOW)  # old: a late redelivery
