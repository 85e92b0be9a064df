"""One trace per command, end to end: the API and a worker process started with the standard
``OTEL_*`` settings export their spans over OTLP/HTTP to a real receiver (``POST /v1/traces``,
protobuf, decoded with opentelemetry-proto), and a command sent over HTTP shows its request,
its record in the command log, its publish, its run, its Stripe call and the events it
emitted as one trace; a publisher of another service that sends a ``traceparent`` sees its
trace continue in the worker."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from adapters.messaging.publisher import CeleryPublisher, publishing_app
from adapters.observability.tracing import start_tracing, stop_tracing
from domain.ports.commands import CommandMessage
from stripe_emulator import DEFAULT_API_KEY, EmulatorAdmin
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.support.records import create_organization, create_user
from tests.support.stack import Stack, eventually, stack_of_its_own
from worker.settings import Settings

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TRACING_REDIS_DB = 4
CREATE_ACCOUNT = "billing.create_account"
SERVER, PRODUCER, CONSUMER, CLIENT = 2, 4, 5, 3
"""``Span.SpanKind`` in OTLP's protobuf."""


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def stack(workdir: Path, redis_server: str, receiver: OtlpReceiver) -> Iterator[Stack]:
    """The API and one worker node, tracing on through the OTLP endpoint alone (no exporter
    named, no service name: the defaults), their batches sent every 200 ms."""
    database_url = f"sqlite:///{workdir / 'tracing.db'}"
    upgrade(database_url)
    with stack_of_its_own(
        "tracing",
        workdir,
        database_url,
        f"{redis_server}/{TRACING_REDIS_DB}",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_BSP_SCHEDULE_DELAY="200",
    ) as system:
        system.start_worker()
        system.start_api()
        system.client = system.new_client()
        yield system


def the_trace_of(receiver: OtlpReceiver, command_id: str, *names: str) -> list[ReceivedSpan]:
    """The spans of the trace whose run ran ``command_id``, once it holds a span of each of
    ``names`` (each process exports its own batches, in its own time)."""
    seen: list[str] = []

    def found() -> list[ReceivedSpan] | None:
        runs = [
            span
            for span in receiver.spans
            if span.kind == CONSUMER and span.attributes.get("billing.command.id") == command_id
        ]
        if not runs:
            return None
        spans = receiver.of_trace(runs[0].trace_id)
        seen[:] = [span.name for span in spans]
        return spans if set(names) <= set(seen) else None

    try:
        return eventually(found, 30, f"the trace of {command_id}")
    except AssertionError:
        runs = [(span.name, span.attributes) for span in receiver.spans if span.kind == CONSUMER]
        raise AssertionError(f"wanted {names}, the trace holds {seen}; runs: {runs}") from None


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    named = [span for span in spans if span.name == name]
    assert len(named) == 1, (name, [span.name for span in spans])
    return named[0]


def ancestors(spans: list[ReceivedSpan], span: ReceivedSpan) -> list[str]:
    """The names of ``span``'s parents, nearest first, as far as the trace holds them."""
    by_id = {each.span_id: each for each in spans}
    names = []
    while span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
        names.append(span.name)
    return names


def test_a_command_sent_over_http_is_one_trace_from_its_request_to_its_stripe_call(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    email = f"billing-{uuid.uuid4().hex[:8]}@acme.example"
    with stack.http() as api:
        response = api.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme Ltd", "email": email, "currency": "usd"}},
            headers={"Idempotency-Key": f"trace-{uuid.uuid4().hex}"},
        )
    assert response.status_code < 300, response.text
    command_id = response.headers["Command-Id"]

    request_name = "POST /v1beta1/organizations/{org_id}/billing"
    spans = the_trace_of(receiver, command_id, request_name, "stripe create customer")

    request = one(spans, request_name)
    assert request.kind == SERVER
    assert request.parent_span_id == ""  # the trace begins with the request
    recorded = one(spans, "command_log accept")
    published = one(spans, f"publish {CREATE_ACCOUNT}")
    run = one(spans, f"run/{CREATE_ACCOUNT}")
    stripe_call = one(spans, "stripe create customer")
    assert ancestors(spans, recorded)[-1] == request.name
    assert ancestors(spans, published)[-1] == request.name
    # The worker's run continues the trace from the message the API published.
    assert run.parent_span_id == published.span_id
    assert run.kind == CONSUMER
    assert published.kind == PRODUCER
    assert f"run/{CREATE_ACCOUNT}" in ancestors(spans, stripe_call)
    assert stripe_call.kind == CLIENT
    emitted = [span for span in spans if span.name.startswith("emit ")]
    assert emitted, [span.name for span in spans]
    assert all(span.attributes["billing.command.id"] == command_id for span in emitted)
    assert all(f"run/{CREATE_ACCOUNT}" in ancestors(spans, span) for span in emitted)

    # The Stripe call names the idempotency key Stripe was sent, and its answer.
    with EmulatorAdmin(stack.stripe_url) as emulator:
        creations = [
            logged
            for logged in emulator.requests(path_prefix="/v1/customers", method="POST")
            if logged.form.get("email") == email
        ]
    assert len(creations) == 1
    assert stripe_call.attributes["stripe.idempotency_key"] == creations[0].idempotency_key
    assert stripe_call.attributes["http.response.status_code"] == 200
    # Never a secret nor the customer's personal data in what was exported.
    exported = repr([(span.attributes, span.resource) for span in spans])
    assert DEFAULT_API_KEY not in exported
    assert stack.client is not None
    assert stack.client.secret not in exported
    assert email not in exported

    processes = {span.resource["billing_worker.process"] for span in spans}
    assert processes == {"api", "worker"}
    assert {span.resource["service.name"] for span in spans} == {"billing-worker"}


def test_a_publisher_that_sends_a_traceparent_sees_its_trace_continue_in_the_worker(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    user = create_user(stack.sessions, SystemClock(), email=f"u-{uuid.uuid4().hex[:8]}@x.example")
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)

    # The how-to's publisher (examples/publish_command_traced.py), in a process of its own.
    published = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "publish_command_traced.py"),
            user.id,
            f"00-{trace_id}-{parent_id}-01",
        ],
        env={**os.environ, "REDIS_URL": stack.redis_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert published.returncode == 0, published.stderr
    command_id = published.stdout.strip()

    spans = the_trace_of(receiver, command_id, "run/users.enable")

    run = one(spans, "run/users.enable")
    assert run.trace_id == trace_id
    assert run.parent_span_id == parent_id
    assert one(spans, "command_log run_in_one_transaction").trace_id == trace_id


def test_a_command_published_without_trace_context_starts_its_own_trace(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    user = create_user(stack.sessions, SystemClock(), email=f"u-{uuid.uuid4().hex[:8]}@x.example")
    command_id = str(uuid.uuid4())
    publisher = Celery("another-service", broker=stack.redis_url)
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    try:
        publisher.send_task(
            "users.enable", queue="users", kwargs={"command_id": command_id, "user_id": user.id}
        )
    finally:
        publisher.close()

    run = one(the_trace_of(receiver, command_id, "run/users.enable"), "run/users.enable")

    assert run.parent_span_id == ""


def test_a_published_command_carries_its_publish_spans_trace_context_in_its_headers(
    stack: Stack,
) -> None:
    exporter = InMemorySpanExporter()
    start_tracing("test", exporter=exporter)
    queue = f"tracing-{uuid.uuid4().hex[:8]}"  # consumed by nobody: the message stays
    command_id = str(uuid.uuid4())
    app = publishing_app(Settings(redis_url=stack.redis_url))
    try:
        CeleryPublisher(app).publish(
            CommandMessage(
                id=command_id,
                type="users.enable",
                payload={"command_id": command_id, "user_id": "usr_1"},
                queue=queue,
            )
        )
    finally:
        app.close()
        stop_tracing()

    [published] = exporter.get_finished_spans()
    assert published.name == "publish users.enable"
    client = redis.Redis.from_url(stack.redis_url)
    raw = client.lpop(queue)
    assert isinstance(raw, bytes)
    message = json.loads(raw)
    client.close()
    context = published.get_span_context()
    assert context is not None
    version, trace_id, parent_id, flags = message["headers"]["traceparent"].split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled
