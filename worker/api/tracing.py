"""The API's spans: one server span for each HTTP request (OpenTelemetry's FastAPI
instrumentation), continuing a caller's ``traceparent``. Within it the command log's record and
the publish make theirs (``adapters/observability/tracing.py``), and the message carries the
trace on to the worker."""

from __future__ import annotations

import os

from fastapi import FastAPI

from adapters.observability.tracing import tracer_provider

UNTRACED_PATHS = "healthz,readyz,metrics"
"""What the API serves without a span: probes and scrapes, every few seconds (regular
expressions, comma-separated, as ``OTEL_PYTHON_FASTAPI_EXCLUDED_URLS`` takes them, which
replaces these)."""


def trace_requests(app: FastAPI) -> None:
    """A server span for each request ``app`` serves, once tracing started in this process
    (nothing otherwise: no middleware, no cost)."""
    provider = tracer_provider()
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS", UNTRACED_PATHS),
        # No span for each ASGI message a request receives or sends: three spans a request
        # where one tells the story.
        exclude_spans=["receive", "send"],
    )
