"""The spans our adapters make, caught by the SDK's in-memory exporter: a Stripe call through
the real SDK to the emulator (its operation and idempotency key, never the API key nor the
customer's data), the command log's record on a real database, and nothing at all while
tracing is off."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import session_factory
from adapters.observability.tracing import inject_trace_context, span, start_tracing, stop_tracing
from adapters.provider.stripe_adapter import StripeBillingProvider
from domain.billing.account_details import Address
from domain.billing.accounts import ProviderCustomer
from domain.errors import CommandError
from tests.support.emulator import EMULATOR_KEY

EMAIL = "billing@acme.example"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert start_tracing("test", exporter=exporter) is not None
    try:
        yield exporter
    finally:
        stop_tracing()


def a_customer() -> ProviderCustomer:
    return ProviderCustomer(
        billing_account_id=f"ba_{uuid.uuid4().hex[:8]}",
        org_id="org_1",
        name="Acme Ltd",
        email=EMAIL,
        phone="",
        address=Address(),
        tax_ids=(),
        metadata={},
    )


def test_a_stripe_call_is_a_client_span_naming_its_operation_and_idempotency_key(
    provider: StripeBillingProvider, exported: InMemorySpanExporter
) -> None:
    provider.create_customer(a_customer(), idempotency_key="idem-trace-1")

    [call] = exported.get_finished_spans()
    assert call.name == "stripe create customer"
    assert call.kind is SpanKind.CLIENT
    attributes = dict(call.attributes or {})
    assert attributes["stripe.idempotency_key"] == "idem-trace-1"
    assert attributes["stripe.call_kind"] == "write"
    assert attributes["http.response.status_code"] == 200
    assert attributes["server.address"] == "127.0.0.1"
    assert EMULATOR_KEY not in repr(attributes)
    assert EMAIL not in repr(attributes)


def test_a_stripe_call_that_fails_marks_its_span_failed_with_stripes_status(
    provider: StripeBillingProvider, exported: InMemorySpanExporter
) -> None:
    with pytest.raises(CommandError):
        provider.get_customer("cus_missing")

    [call] = exported.get_finished_spans()
    assert call.name == "stripe retrieve customer"
    assert call.status.status_code is StatusCode.ERROR
    assert dict(call.attributes or {})["http.response.status_code"] == 404
    assert "stripe.idempotency_key" not in (call.attributes or {})


def test_the_command_log_records_a_command_in_a_span_naming_it(
    fresh_database: str, exported: InMemorySpanExporter
) -> None:
    log = SqlCommandLog(session_factory(fresh_database), SystemClock())
    command_id = str(uuid.uuid4())

    log.accept(
        command_id=command_id,
        command_type="users.enable",
        payload={"command_id": command_id, "user_id": "usr_1"},
        client_id=None,
        idempotency_key=None,
        request_fingerprint=None,
    )

    [recorded] = exported.get_finished_spans()
    assert recorded.name == "command_log accept"
    assert dict(recorded.attributes or {}) == {
        "billing.command.id": command_id,
        "billing.command.type": "users.enable",
    }


def test_while_tracing_is_off_a_span_records_nothing_and_no_trace_context_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    assert start_tracing("test") is None

    headers: dict[str, str] = {}
    with span("command_log accept") as current:
        inject_trace_context(headers)

    assert not current.is_recording()
    assert headers == {}
