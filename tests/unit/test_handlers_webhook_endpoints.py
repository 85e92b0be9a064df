"""The operators' webhook handlers (add, list, disable, enable, rotate, deliveries, replay), on
in-memory ports."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.handlers.events import webhook_endpoints as handlers
from application.requests.operator_requests import (
    AddEndpoint,
    DisableEndpoint,
    EnableEndpoint,
    GetEndpoint,
    ListDeliveries,
    ListEndpoints,
    ReplayDeliveries,
    ReplayFailed,
    RotateSecret,
)
from domain.errors import ErrorCode, FailedPrecondition, InvalidArgument, NotFound
from domain.events.catalog import EVENT_TYPES
from domain.webhooks import DeliveryState, EndpointState, WebhookDelivery, WebhookEndpoint
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.clock import T0

URL = "https://hooks.example/billing"
GRACE = timedelta(hours=24)


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication()


def an_endpoint(app: FakeApplication, *, enabled: bool = True) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.new(URL, [], T0)
    if not enabled:
        endpoint.disable("receiver gone", T0)
    app.db.seed(endpoint)
    return endpoint


def a_delivery(
    app: FakeApplication,
    endpoint: WebhookEndpoint,
    state: DeliveryState,
    *,
    sequence: int = 1,
    event_id: str | None = None,
) -> WebhookDelivery:
    delivery = WebhookDelivery.of(
        event_id or f"evt_{sequence}",
        "user.enabled",
        sequence,
        "user:usr_1",
        endpoint.id,
        T0 + timedelta(seconds=sequence),
    )
    delivery.state = state
    if state is DeliveryState.FAILED:
        delivery.attempts = 7
        delivery.first_attempt_at = T0
        delivery.last_error = "HTTP 500"
    if state is DeliveryState.DELIVERING:
        delivery.claims = 1
        delivery.lease_until = T0 + timedelta(minutes=1)
    app.db.seed(delivery)
    return delivery


def stored_delivery(app: FakeApplication, delivery_id: str) -> WebhookDelivery:
    found: WebhookDelivery = app.db.row("webhook_deliveries", delivery_id)
    return found


def stored_endpoint(app: FakeApplication, endpoint_id: str) -> WebhookEndpoint:
    found: WebhookEndpoint = app.db.row("webhook_endpoints", endpoint_id)
    return found


# --- add, list, get ------------------------------------------------------------------------


def test_an_added_endpoint_is_enabled_for_every_event_and_its_secret_is_given_once(
    app: FakeApplication,
) -> None:
    added = handlers.add_endpoint(AddEndpoint(URL, [], "billing"), app)

    stored = stored_endpoint(app, added.endpoint.id)
    assert stored.state is EndpointState.ENABLED
    assert stored.event_types == ["*"]
    assert stored.description == "billing"
    assert added.secret.startswith("whsec_")
    assert stored.secret == added.secret
    assert "secret" not in str(added.endpoint.to_view())


def test_an_endpoint_takes_the_event_types_it_names_each_once(app: FakeApplication) -> None:
    names = ["user.enabled", "command.failed", "user.enabled"]

    added = handlers.add_endpoint(AddEndpoint(URL, names), app)

    assert stored_endpoint(app, added.endpoint.id).event_types == ["user.enabled", "command.failed"]


@pytest.mark.parametrize(
    ("url", "events", "description", "field"),
    [
        ("ftp://hooks.example/x", [], "", "url"),
        ("https://", [], "", "url"),
        ("https://hooks.example/a b", [], "", "url"),
        ("https://[::1/x", [], "", "url"),
        ("https://hooks.example/\x00", [], "", "url"),
        (URL, ["user.deleted"], "", "events"),
        (URL, [], "x" * 256, "description"),
        (URL, [], "bad \ud800", "description"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_field_and_nothing_is_stored(
    app: FakeApplication, url: str, events: list[str], description: str, field: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        handlers.add_endpoint(AddEndpoint(url, events, description), app)

    violations = raised.value.details[0]["fieldViolations"]
    assert violations[0]["field"] == field
    assert app.db.rows("webhook_endpoints") == []


def test_an_unknown_event_type_is_refused_naming_the_known_ones(app: FakeApplication) -> None:
    with pytest.raises(InvalidArgument) as raised:
        handlers.add_endpoint(AddEndpoint(URL, ["user.deleted"]), app)

    assert "'user.deleted'" in raised.value.message
    assert all(name in raised.value.message for name in EVENT_TYPES)


def test_endpoints_are_listed_oldest_first_and_one_is_found_by_id(app: FakeApplication) -> None:
    first = handlers.add_endpoint(AddEndpoint(URL), app).endpoint
    app.clock.advance(timedelta(seconds=1))
    second = handlers.add_endpoint(AddEndpoint("http://other.example/hook"), app).endpoint

    assert [e.id for e in handlers.list_endpoints(ListEndpoints(), app)] == [first.id, second.id]
    assert handlers.get_endpoint(GetEndpoint(second.id), app).url == "http://other.example/hook"


def test_an_unknown_endpoint_is_not_found_naming_it(app: FakeApplication) -> None:
    for action in (
        lambda: handlers.get_endpoint(GetEndpoint("we_nope"), app),
        lambda: handlers.disable_endpoint(DisableEndpoint("we_nope", "x"), app),
        lambda: handlers.enable_endpoint(EnableEndpoint("we_nope"), app),
        lambda: handlers.rotate_secret(RotateSecret("we_nope", GRACE), app),
        lambda: handlers.list_deliveries(ListDeliveries(endpoint_id="we_nope"), app),
        lambda: handlers.replay_failed(ReplayFailed("we_nope"), app),
    ):
        with pytest.raises(NotFound) as raised:
            action()
        assert raised.value.details[0]["resourceName"] == "we_nope"
        assert raised.value.details[0]["resourceType"] == "webhook_endpoint"


# --- disable, enable -----------------------------------------------------------------------


def test_disabling_marks_its_unfinished_deliveries_failed_with_the_reason(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app)
    pending = a_delivery(app, endpoint, DeliveryState.PENDING, sequence=1)
    delivering = a_delivery(app, endpoint, DeliveryState.DELIVERING, sequence=2)
    succeeded = a_delivery(app, endpoint, DeliveryState.SUCCEEDED, sequence=3)
    other = a_delivery(app, an_endpoint(app), DeliveryState.PENDING, sequence=4)
    app.clock.advance(timedelta(minutes=3))

    disabled = handlers.disable_endpoint(
        DisableEndpoint(endpoint.id, "  receiver\n\x1b\x00\ud800moved "), app
    )

    assert disabled.abandoned == 2
    stored = stored_endpoint(app, endpoint.id)
    assert (stored.state, stored.disabled_reason) == (EndpointState.DISABLED, "receiver moved")
    assert stored.disabled_at == T0 + timedelta(minutes=3)
    for abandoned in (pending, delivering):
        row = stored_delivery(app, abandoned.id)
        assert row.state is DeliveryState.FAILED
        assert row.last_error == "endpoint disabled: receiver moved"
        assert row.lease_until is None
    assert stored_delivery(app, succeeded.id).state is DeliveryState.SUCCEEDED
    assert stored_delivery(app, other.id).state is DeliveryState.PENDING


def test_disabling_without_a_reason_says_an_operator_did_it(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)

    handlers.disable_endpoint(DisableEndpoint(endpoint.id), app)

    assert stored_endpoint(app, endpoint.id).disabled_reason == "disabled by an operator"


def test_disabling_a_disabled_endpoint_keeps_its_first_reason(app: FakeApplication) -> None:
    endpoint = an_endpoint(app, enabled=False)

    again = handlers.disable_endpoint(DisableEndpoint(endpoint.id, "another reason"), app)

    assert again.endpoint.disabled_reason == "receiver gone"
    assert stored_endpoint(app, endpoint.id).disabled_reason == "receiver gone"


def test_a_reason_over_500_characters_is_refused(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)

    with pytest.raises(InvalidArgument):
        handlers.disable_endpoint(DisableEndpoint(endpoint.id, "x" * 501), app)

    assert stored_endpoint(app, endpoint.id).is_enabled


def test_enabling_clears_the_reason_and_leaves_failed_deliveries_failed(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app, enabled=False)
    failed = a_delivery(app, endpoint, DeliveryState.FAILED)

    enabled = handlers.enable_endpoint(EnableEndpoint(endpoint.id), app)

    stored = stored_endpoint(app, endpoint.id)
    assert enabled.is_enabled
    assert stored.is_enabled
    assert (stored.disabled_reason, stored.disabled_at) == (None, None)
    assert stored_delivery(app, failed.id).state is DeliveryState.FAILED


def test_enabling_an_enabled_endpoint_writes_nothing(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)

    handlers.enable_endpoint(EnableEndpoint(endpoint.id), app)

    assert app.db.commits == 0


# --- secrets -------------------------------------------------------------------------------


def test_a_rotated_secret_is_new_and_the_old_one_signs_beside_it_for_the_grace(
    app: FakeApplication,
) -> None:
    added = handlers.add_endpoint(AddEndpoint(URL), app)
    app.clock.advance(timedelta(minutes=1))

    rotated = handlers.rotate_secret(RotateSecret(added.endpoint.id, timedelta(hours=2)), app)

    assert rotated.secret != added.secret
    assert rotated.previous_valid_until == T0 + timedelta(minutes=1, hours=2)
    stored = stored_endpoint(app, added.endpoint.id)
    assert stored.signing_secrets(T0 + timedelta(hours=2)) == [rotated.secret, added.secret]
    assert stored.signing_secrets(T0 + timedelta(hours=2, minutes=1)) == [rotated.secret]


# --- deliveries ----------------------------------------------------------------------------


def test_deliveries_are_listed_newest_first_by_state_endpoint_and_event(
    app: FakeApplication,
) -> None:
    endpoint, other = an_endpoint(app), an_endpoint(app)
    old_failure = a_delivery(app, endpoint, DeliveryState.FAILED, sequence=1)
    a_delivery(app, endpoint, DeliveryState.SUCCEEDED, sequence=2)
    new_failure = a_delivery(app, endpoint, DeliveryState.FAILED, sequence=3, event_id="evt_3")
    elsewhere = a_delivery(app, other, DeliveryState.FAILED, sequence=4)

    failed = handlers.list_deliveries(
        ListDeliveries(failed_only=True, endpoint_id=endpoint.id), app
    )
    by_state = handlers.list_deliveries(ListDeliveries(state=DeliveryState.FAILED, limit=2), app)
    by_event = handlers.list_deliveries(ListDeliveries(event_id="evt_3"), app)

    assert [d.id for d in failed] == [new_failure.id, old_failure.id]
    assert [d.id for d in by_state] == [elsewhere.id, new_failure.id]
    assert [d.id for d in by_event] == [new_failure.id]
    assert handlers.list_deliveries(ListDeliveries(event_id="evt_nope"), app) == []


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"failed_only": True, "state": DeliveryState.PENDING}, "state"),
    ],
)
def test_a_bad_delivery_filter_is_refused_naming_the_field(
    app: FakeApplication, options: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        handlers.list_deliveries(ListDeliveries(**options), app)  # type: ignore[arg-type]

    assert raised.value.details[0]["fieldViolations"][0]["field"] == field


def test_a_replayed_delivery_is_pending_now_with_a_new_budget(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)
    failed = a_delivery(app, endpoint, DeliveryState.FAILED)
    app.clock.advance(timedelta(hours=30))

    (replayed,) = handlers.replay_deliveries(ReplayDeliveries([failed.id]), app)

    stored = stored_delivery(app, failed.id)
    assert replayed.id == failed.id
    assert stored.state is DeliveryState.PENDING
    assert stored.next_attempt_at == T0 + timedelta(hours=30)
    assert (stored.attempts, stored.first_attempt_at) == (0, None)


def test_replaying_a_delivery_of_a_disabled_endpoint_is_refused_until_it_is_enabled(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app, enabled=False)
    failed = a_delivery(app, endpoint, DeliveryState.FAILED)

    with pytest.raises(FailedPrecondition) as raised:
        handlers.replay_deliveries(ReplayDeliveries([failed.id]), app)

    assert raised.value.code is ErrorCode.FAILED_PRECONDITION
    assert f"endpoint {endpoint.id!r} is disabled (receiver gone)" in raised.value.message
    assert "enable it" in raised.value.message
    assert raised.value.details[0]["reason"] == "ENDPOINT_DISABLED"
    assert stored_delivery(app, failed.id).state is DeliveryState.FAILED

    handlers.enable_endpoint(EnableEndpoint(endpoint.id), app)
    handlers.replay_deliveries(ReplayDeliveries([failed.id]), app)

    assert stored_delivery(app, failed.id).state is DeliveryState.PENDING


def test_a_replay_is_all_or_nothing(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)
    failed = a_delivery(app, endpoint, DeliveryState.FAILED, sequence=1)
    succeeded = a_delivery(app, endpoint, DeliveryState.SUCCEEDED, sequence=2)

    with pytest.raises(FailedPrecondition) as refused:
        handlers.replay_deliveries(ReplayDeliveries([failed.id, succeeded.id]), app)
    with pytest.raises(NotFound) as missing:
        handlers.replay_deliveries(ReplayDeliveries([failed.id, "whd_nope"]), app)

    assert "only failed deliveries replay" in refused.value.message
    assert missing.value.details[0]["resourceType"] == "webhook_delivery"
    assert stored_delivery(app, failed.id).state is DeliveryState.FAILED


def test_replaying_an_endpoints_failures_replays_every_one_of_them_and_nothing_else(
    app: FakeApplication,
) -> None:
    endpoint, other = an_endpoint(app), an_endpoint(app)
    failures = [a_delivery(app, endpoint, DeliveryState.FAILED, sequence=n) for n in range(5)]
    succeeded = a_delivery(app, endpoint, DeliveryState.SUCCEEDED, sequence=6)
    elsewhere = a_delivery(app, other, DeliveryState.FAILED, sequence=7)

    count = handlers.replay_failed(ReplayFailed(endpoint.id, batch_size=2), app)  # in three batches

    assert count == 5
    assert {stored_delivery(app, d.id).state for d in failures} == {DeliveryState.PENDING}
    assert stored_delivery(app, succeeded.id).state is DeliveryState.SUCCEEDED
    assert stored_delivery(app, elsewhere.id).state is DeliveryState.FAILED


def test_replaying_the_failures_of_a_disabled_endpoint_is_refused(app: FakeApplication) -> None:
    endpoint = an_endpoint(app, enabled=False)
    failed = a_delivery(app, endpoint, DeliveryState.FAILED)

    with pytest.raises(FailedPrecondition, match="enable it"):
        handlers.replay_failed(ReplayFailed(endpoint.id), app)

    assert stored_delivery(app, failed.id).state is DeliveryState.FAILED


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9999/hook",
        "http://localhost/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "https://192.168.1.1/hook",
    ],
)
def test_an_endpoint_on_a_host_that_is_not_public_is_refused_unless_private_networks_are_allowed(
    app: FakeApplication, url: str
) -> None:
    with pytest.raises(InvalidArgument, match="not a public address") as refused:
        handlers.add_endpoint(AddEndpoint(url), app)
    assert refused.value.to_body()["details"][0]["fieldViolations"][0]["field"] == "url"

    added = handlers.add_endpoint(AddEndpoint(url, allow_private_networks=True), app)
    assert added.endpoint.url == url


def test_an_endpoints_failures_are_replayed_oldest_first_so_a_subject_goes_out_in_order(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app)
    failures = [a_delivery(app, endpoint, DeliveryState.FAILED, sequence=n) for n in range(4)]
    pending_after_each_batch: list[set[str]] = []

    def pending() -> set[str]:
        return {d.id for d in failures if stored_delivery(app, d.id).state is DeliveryState.PENDING}

    app.db.before_next_commit(lambda: None)  # the first batch's commit
    app.db.before_next_commit(lambda: pending_after_each_batch.append(pending()))

    handlers.replay_failed(ReplayFailed(endpoint.id, batch_size=2), app)

    # What a sweep could send between two batches: the subject's two oldest, never newer ones.
    assert pending_after_each_batch == [{failures[0].id, failures[1].id}]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://hooks.example:99999/x", "has no valid port"),
        ("https://hooks.example:abc/x", "has no valid port"),
        ("https://user:pass@hooks.example/x", "holds credentials"),
        ("http://2130706433/hook", "not a public address"),
    ],
)
def test_an_endpoint_with_a_bad_port_credentials_or_a_numeric_private_host_is_refused(
    app: FakeApplication, url: str, says: str
) -> None:
    with pytest.raises(InvalidArgument, match=says):
        handlers.add_endpoint(AddEndpoint(url), app)
