"""Traces: OpenTelemetry spans that follow one command from the HTTP request through the
command log, its publish, the worker's run and its Stripe calls to the events it emitted.

**Off unless the standard ``OTEL_*`` settings name a destination** (:func:`tracing_choice`):
``OTEL_TRACES_EXPORTER`` naming an exporter (``otlp``, ``console``), or an OTLP endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) with the exporter
left unset. The OpenTelemetry specification defaults the exporter to ``otlp`` towards
``localhost:4318``: followed to the letter, every deployment that never asked for traces would
build spans and try to send them to a collector that is not there. ``OTEL_SERVICE_NAME`` or
``OTEL_RESOURCE_ATTRIBUTES`` alone enable nothing (platforms set them for logs and metrics
too); ``OTEL_SDK_DISABLED=true`` and ``OTEL_TRACES_EXPORTER=none`` always turn it off.
Everything else is the SDK's own reading of the ``OTEL_*`` variables: the endpoint, headers,
timeout, the sampler (``OTEL_TRACES_SAMPLER``), the batch processor's limits
(``OTEL_BSP_*``), the resource.

**Built lazily, once per process** (:func:`start_tracing`): the API when uvicorn builds the
app, a worker in each pool process after Celery's fork (``worker_process_init``), never in
the node's main process; the provider's export thread is never inherited across a fork.

The adapters that make spans (``adapters/db/command_log.py``, ``command_runs.py``,
``events.py``, ``adapters/messaging/publisher.py``, ``adapters/provider/stripe_requests.py``)
use :func:`span`, which does nothing until a provider is set: tracing off costs them one
no-op call each. Domain and application never import OpenTelemetry.

W3C trace context travels in the message's headers (``traceparent``, ``tracestate``): the
publisher writes them (:func:`inject_trace_context`), the worker's run reads them (the Celery
instrumentation), so a service that publishes onto our queues with its own ``traceparent``
sees its trace continue.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import propagate, trace
from opentelemetry.trace import Span
from opentelemetry.trace import SpanKind as SpanKind  # the kinds of span our adapters make

logger = logging.getLogger(__name__)

TRACER_NAME = "billing_worker"
DEFAULT_SERVICE_NAME = "billing-worker"
PROCESS_ATTRIBUTE = "billing_worker.process"
"""The resource attribute naming the kind of process a span comes from (api, worker, beat)."""
COMMAND_ID = "billing.command.id"
COMMAND_TYPE = "billing.command.type"
EVENT_ID = "billing.event.id"
EVENT_TYPE = "billing.event.type"
IDEMPOTENCY_KEY = "stripe.idempotency_key"
EXPORTERS = ("otlp", "console")
"""The span exporters this release ships (``OTEL_TRACES_EXPORTER``); OTLP speaks
``http/protobuf`` only (``OTEL_EXPORTER_OTLP_PROTOCOL``: the gRPC exporter is not installed)."""
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")

Exporter = Literal["otlp", "console"]

_NO_TRACER: trace.Tracer = trace.NoOpTracer()
_tracer: trace.Tracer = _NO_TRACER
"""What makes every span of ours: a no-op one until :func:`start_tracing` built this
process's provider."""


@dataclass(frozen=True)
class TracingChoice:
    """What the environment asks for: the exporters to send spans to (none: tracing off),
    and why (a log line at start-up)."""

    exporters: tuple[Exporter, ...]
    reason: str

    @property
    def enabled(self) -> bool:
        return bool(self.exporters)


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def tracing_choice(environ: Mapping[str, str] | None = None) -> TracingChoice:
    """Whether, and where to, this process sends spans, from the ``OTEL_*`` settings
    (the module's docstring argues the rule)."""
    env = os.environ if environ is None else environ
    if _is_true(env.get("OTEL_SDK_DISABLED")):
        return TracingChoice((), "OTEL_SDK_DISABLED=true")
    named = [
        name.strip().lower()
        for name in (env.get("OTEL_TRACES_EXPORTER") or "").split(",")
        if name.strip()
    ]
    endpoint = next((env[name] for name in ENDPOINT_VARIABLES if env.get(name)), None)
    if not named:
        if endpoint is None:
            return TracingChoice((), "no OTEL_TRACES_EXPORTER and no OTLP endpoint set")
        named = ["otlp"]
    if "none" in named:
        return TracingChoice((), "OTEL_TRACES_EXPORTER=none")
    exporters: list[Exporter] = []
    for name in named:
        if name == "otlp":
            protocol = next((env[var] for var in PROTOCOL_VARIABLES if env.get(var)), None)
            if protocol not in (None, "http/protobuf"):
                logger.error(
                    "OTLP protocol %s is not supported (only http/protobuf): no spans are sent "
                    "over OTLP",
                    protocol,
                )
                continue
            exporters.append("otlp")
        elif name == "console":
            exporters.append("console")
        else:
            logger.error(
                "OTEL_TRACES_EXPORTER names %r, not one of %s: ignored", name, ", ".join(EXPORTERS)
            )
    return TracingChoice(tuple(dict.fromkeys(exporters)), f"exporters {', '.join(named)}")


_provider: Any = None
_provider_pid: int | None = None


def start_tracing(
    process: str,
    *,
    environ: Mapping[str, str] | None = None,
    exporter: Any = None,
) -> Any:
    """Build this process's tracer provider once (again in a forked child) if
    :func:`tracing_choice` says so, exporting in batches to the exporters it names, and make it
    OpenTelemetry's global one; or, given an ``exporter`` (a test's in-memory one), export each
    span to it at once and leave the global alone. Returns the provider, or ``None`` when
    tracing is off. ``process`` (``api``, ``worker``) is kept on every span's resource
    (:data:`PROCESS_ATTRIBUTE`)."""
    global _provider, _provider_pid, _tracer
    if _provider is not None and _provider_pid == os.getpid():
        return _provider
    choice = tracing_choice(environ)
    if exporter is None and not choice.enabled:
        logger.debug("tracing off: %s", choice.reason)
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    resource = Resource.create({PROCESS_ATTRIBUTE: process})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        # Neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES named the service.
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        for name in choice.exporters:
            if name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            else:
                provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    if exporter is None:
        # For any other library that asks OpenTelemetry for the global provider (ours are
        # handed this one). Settable once per process: a test's in-memory one is never global.
        trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer(TRACER_NAME)
    _provider, _provider_pid = provider, os.getpid()
    logger.info("tracing on (%s) in the %s process", choice.reason, process)
    return provider


def stop_tracing() -> None:
    """Send the spans still buffered and stop this process's provider (a process that
    exits, a test that ends)."""
    global _provider, _provider_pid, _tracer
    provider = _provider
    if provider is None or _provider_pid != os.getpid():
        return
    _provider, _provider_pid, _tracer = None, None, _NO_TRACER
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    provider.shutdown()


def tracing_started() -> bool:
    """Whether this process records spans (:func:`start_tracing` built its provider)."""
    return _provider is not None and _provider_pid == os.getpid()


def instrument_celery_worker() -> None:
    """A span for each task a worker runs (``run/<task>``), continuing the trace its message's
    ``traceparent`` header names, and one for each message it publishes with an app that knows
    the task (``apply_async/<task>``): OpenTelemetry's Celery instrumentation, once per process,
    after :func:`start_tracing`."""
    if not tracing_started():
        return
    from celery.signals import task_prerun
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=_provider)
        # Connected after the instrumentation's own handler: its run span is current then.
        task_prerun.connect(_name_the_command, weak=False)


def _name_the_command(kwargs: Mapping[str, Any] | None = None, **_: Any) -> None:
    """The run's span names its command (what an operator searches a trace by): the task's
    ``command_id`` argument, which a publisher's task id need not be."""
    command_id = (kwargs or {}).get("command_id")
    annotate_span(COMMAND_ID, command_id if isinstance(command_id, str) else None)


def tracer_provider() -> Any:
    """This process's tracer provider, or ``None`` while tracing is off (what the API hands
    the FastAPI instrumentation)."""
    return _provider if tracing_started() else None


@contextmanager
def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A span of ours around a block (a no-op while tracing is off); an exception that leaves
    the block is recorded on it and marks it failed."""
    with _tracer.start_as_current_span(name, kind=kind, attributes=attributes) as current:
        yield current


def inject_trace_context(headers: MutableMapping[str, Any]) -> None:
    """Write the current trace context (W3C ``traceparent``, ``tracestate``) into a message's
    ``headers``; nothing while no span is recording."""
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(headers)


def annotate_span(key: str, value: str | int | None) -> None:
    """Set ``key`` on the current span (nothing while none records, or for ``None``)."""
    if value is None:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attribute(key, value)
