"""The outbox's and the webhook repositories' contract, on the real unit of work (SQLite,
PostgreSQL) and on the unit tests' fake: what the relay and the deliveries rely on."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest

from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.errors import UniquenessViolation
from domain.events.users import UserEnabledEvent
from domain.ports.repositories import UnitOfWork
from domain.users import User, UserState
from domain.webhooks import DeliveryClaim, DeliveryState, WebhookDelivery, WebhookEndpoint
from tests.support.fakes.clock import T0
from tests.support.fakes.database import FakeDatabase

Store = Callable[[], UnitOfWork]
SECOND = timedelta(seconds=1)


@pytest.fixture(params=["real", "fake"])
def store(
    request: pytest.FixtureRequest, backend: str, make_database: Callable[[str], str]
) -> Store:
    if request.param == "fake":
        if backend != "sqlite":
            pytest.skip("the fake has no backends: it runs once")
        return FakeDatabase().unit_of_work
    sessions = session_factory(make_database(f"outbox_{uuid.uuid4().hex[:8]}"))
    return lambda: SqlUnitOfWork(sessions)


def enabled_event(user_id: str, command_id: str = "c1") -> UserEnabledEvent:
    user = User(user_id, f"{user_id}@x.io", "", UserState.ENABLED, T0, T0)
    return UserEnabledEvent.of(user, command_id=command_id, now=T0)


def write(store: Store, *events: UserEnabledEvent) -> None:
    with store() as uow:
        for event in events:
            uow.events.add(event)
        uow.commit()


def unpublished_ids(store: Store) -> list[str]:
    with store() as uow:
        return [event.id for event in uow.events.unpublished(100)]


def test_an_event_is_in_the_outbox_only_once_its_transaction_commits(store: Store) -> None:
    event = enabled_event("usr_1")
    with store() as uow:
        uow.events.add(event)
        assert unpublished_ids(store) == []
        uow.commit()

    assert unpublished_ids(store) == [event.id]


def test_an_event_of_a_rolled_back_transaction_never_is(store: Store) -> None:
    with store() as uow:
        uow.events.add(enabled_event("usr_1"))

    assert unpublished_ids(store) == []


def test_unpublished_events_come_in_the_order_they_were_written_until_marked(
    store: Store,
) -> None:
    first, second, third = (enabled_event(f"usr_{n}") for n in range(3))
    write(store, first, second)
    write(store, third)

    with store() as uow:
        recorded = uow.events.unpublished(2)
        assert [event.id for event in recorded] == [first.id, second.id]
        assert recorded[0].sequence < recorded[1].sequence
        assert recorded[0].document == first.model_dump(mode="json")
        assert recorded[0].subject_key == "user:usr_0"
        uow.events.mark_published([event.sequence for event in recorded], T0)
        uow.commit()

    assert unpublished_ids(store) == [third.id]
    with store() as uow:
        assert uow.events.count_unpublished() == 1
        found = uow.events.get(first.id)
        assert found is not None
        assert found.type == "user.enabled"


def test_the_latest_events_published_since_an_instant_come_in_outbox_order(
    store: Store,
) -> None:
    # What the failover sweep appends to the stream again: those a lost Redis took from it.
    early, first, second, third, unpublished = (enabled_event(f"usr_{n}") for n in range(5))
    write(store, early, first, second, third, unpublished)
    with store() as uow:
        recorded = {event.id: event.sequence for event in uow.events.unpublished(10)}
        uow.events.mark_published([recorded[early.id]], T0)
        uow.events.mark_published([recorded[first.id], recorded[third.id]], T0 + SECOND)
        uow.events.mark_published([recorded[second.id]], T0 + 2 * SECOND)
        uow.commit()

    with store() as uow:
        since = uow.events.published_since(T0 + SECOND, 10)
        latest_two = uow.events.published_since(T0 + SECOND, 2)

    assert [event.id for event in since] == [first.id, second.id, third.id]
    assert [event.id for event in latest_two] == [second.id, third.id]


def endpoint(url: str = "https://a.example/hook") -> WebhookEndpoint:
    return WebhookEndpoint.new(url, ["*"], T0)


def registered(store: Store, *hooks: WebhookEndpoint) -> None:
    with store() as uow:
        for hook in hooks:
            uow.webhook_endpoints.add(hook)
        uow.commit()


def delivery(
    hook: WebhookEndpoint, sequence: int, subject: str = "user:usr_1", event_id: str | None = None
) -> WebhookDelivery:
    return WebhookDelivery.of(
        event_id or f"evt_{uuid.uuid4().hex}", "user.enabled", sequence, subject, hook.id, T0
    )


def test_endpoints_read_back_as_written_and_only_enabled_ones_are_enabled(store: Store) -> None:
    active, stopped = endpoint(), endpoint("https://b.example/hook")
    stopped.disable("it failed", T0)
    with store() as uow:
        uow.webhook_endpoints.add(active)
        uow.webhook_endpoints.add(stopped)
        uow.commit()

    with store() as uow:
        assert uow.webhook_endpoints.get(active.id) == active
        assert [hook.id for hook in uow.webhook_endpoints.enabled()] == [active.id]
        assert {hook.id for hook in uow.webhook_endpoints.all()} == {active.id, stopped.id}


def test_an_event_is_delivered_once_per_endpoint(store: Store) -> None:
    hook = endpoint()
    registered(store, hook)
    with store() as uow:
        uow.webhook_deliveries.add(delivery(hook, 1, event_id="evt_1"))
        uow.commit()

    with store() as uow:
        uow.webhook_deliveries.add(delivery(hook, 1, event_id="evt_1"))
        with pytest.raises(UniquenessViolation):
            uow.commit()


def test_a_sweep_claims_due_deliveries_and_expired_leases_once(store: Store) -> None:
    hook = endpoint()
    due, later, abandoned = delivery(hook, 1), delivery(hook, 2), delivery(hook, 3)
    later.next_attempt_at = T0 + 60 * SECOND
    abandoned.claim(T0 - 120 * SECOND, timedelta(seconds=60))  # its worker died
    registered(store, hook)
    with store() as uow:
        for each in (due, later, abandoned):
            uow.webhook_deliveries.add(each)
        uow.commit()

    with store() as uow:
        claims = uow.webhook_deliveries.claim_due(T0, T0 + 30 * SECOND, 10)
        uow.commit()
    with store() as uow:
        again = uow.webhook_deliveries.claim_due(T0, T0 + 30 * SECOND, 10)
        uow.commit()
        taken = uow.webhook_deliveries.get(due.id)

    assert sorted(claims, key=lambda claim: claim.delivery_id) == sorted(
        [DeliveryClaim(due.id, 1), DeliveryClaim(abandoned.id, 2)],
        key=lambda claim: claim.delivery_id,
    )
    assert again == []
    assert taken is not None
    assert taken.holds(1)


def test_deliveries_of_a_subject_to_an_endpoint_know_which_comes_before_and_after(
    store: Store,
) -> None:
    hook, other_hook = endpoint(), endpoint("https://b.example/hook")
    first, second, third = delivery(hook, 1), delivery(hook, 2), delivery(hook, 5)
    other_subject = delivery(hook, 3, subject="user:usr_2")
    elsewhere = delivery(other_hook, 0)
    registered(store, hook, other_hook)
    with store() as uow:
        for each in (first, second, third, other_subject, elsewhere):
            uow.webhook_deliveries.add(each)
        uow.commit()

    with store() as uow:
        before_third = uow.webhook_deliveries.earlier_unfinished(third)
        after_first = uow.webhook_deliveries.next_of_subject(first)
        before_first = uow.webhook_deliveries.earlier_unfinished(first)
        loaded = uow.webhook_deliveries.get(first.id)
        assert loaded is not None
        loaded.succeeded(200, T0)
        uow.webhook_deliveries.save(loaded)
        uow.commit()
    with store() as uow:
        before_second = uow.webhook_deliveries.earlier_unfinished(second)
        unfinished = uow.webhook_deliveries.unfinished_for_endpoint(hook.id)
        failed = uow.webhook_deliveries.find(state=DeliveryState.SUCCEEDED)

    assert before_third is not None
    assert before_third.id == first.id
    assert after_first is not None
    assert after_first.id == second.id
    assert before_first is None
    assert before_second is None
    assert [each.id for each in unfinished] == [second.id, other_subject.id, third.id]
    assert [each.id for each in failed] == [first.id]


def test_finished_deliveries_and_delivered_events_are_pruned_oldest_first_and_nothing_else(
    store: Store,
) -> None:
    hook = endpoint()
    registered(store, hook)
    old_event, kept_event, undelivered_event = (enabled_event(f"usr_{n}") for n in range(3))
    write(store, old_event, kept_event, undelivered_event)
    done, failed, pending = (
        delivery(hook, 1, event_id=old_event.id),
        delivery(hook, 2, event_id=kept_event.id),
        delivery(hook, 3, event_id=kept_event.id + "x"),
    )
    done.succeeded(200, T0)
    failed.abandon("endpoint disabled", T0)
    with store() as uow:
        for each in (done, failed, pending):
            uow.webhook_deliveries.add(each)
        recorded = uow.events.unpublished(10)
        uow.events.mark_published([event.sequence for event in recorded], T0)
        uow.commit()
    later = T0 + timedelta(days=1)

    with store() as uow:
        assert uow.webhook_deliveries.prune_finished(DeliveryState.SUCCEEDED, later, 10) == 1
        assert uow.webhook_deliveries.prune_finished(DeliveryState.SUCCEEDED, later, 10) == 0
        with pytest.raises(ValueError, match="never pruned"):
            uow.webhook_deliveries.prune_finished(DeliveryState.PENDING, later, 10)
        # The failed delivery still needs its event (to be replayed); the others do not.
        assert uow.events.prune_published(later, 10) == 2
        uow.commit()

    with store() as uow:
        assert uow.events.get(kept_event.id) is not None
        assert uow.events.get(old_event.id) is None
        assert uow.events.get(undelivered_event.id) is None
        assert uow.webhook_deliveries.get(failed.id) is not None
        assert uow.webhook_deliveries.get(pending.id) is not None
