"""Which standard ``OTEL_*`` settings turn tracing on (``adapters/observability/tracing.py``):
a destination named, never a service name alone; off unless asked."""

from __future__ import annotations

import pytest

from adapters.observability.tracing import tracing_choice

ENDPOINT = "http://collector:4318"


def test_tracing_is_off_when_no_otel_setting_is_set() -> None:
    assert tracing_choice({}).exporters == ()


def test_a_service_name_or_resource_attributes_alone_do_not_turn_tracing_on() -> None:
    environ = {"OTEL_SERVICE_NAME": "billing", "OTEL_RESOURCE_ATTRIBUTES": "deployment=prod"}
    assert not tracing_choice(environ).enabled


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_an_otlp_endpoint_alone_sends_spans_over_otlp(variable: str) -> None:
    assert tracing_choice({variable: ENDPOINT}).exporters == ("otlp",)


def test_naming_the_exporters_turns_tracing_on_without_an_endpoint() -> None:
    # OTLP then goes to the SDK's default endpoint, localhost:4318.
    assert tracing_choice({"OTEL_TRACES_EXPORTER": "otlp,console"}).exporters == (
        "otlp",
        "console",
    )


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT},
        {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "console"},
    ],
)
def test_the_sdk_disabled_or_the_exporter_none_turn_tracing_off_whatever_else_is_set(
    environ: dict[str, str],
) -> None:
    assert tracing_choice(environ).exporters == ()


def test_a_grpc_protocol_sends_nothing_over_otlp_as_only_http_protobuf_is_shipped() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert tracing_choice(environ).exporters == ()


def test_the_traces_protocol_overrides_the_general_one() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert tracing_choice(environ).exporters == ("otlp",)


def test_an_exporter_this_release_does_not_ship_is_ignored_and_the_others_kept() -> None:
    assert tracing_choice({"OTEL_TRACES_EXPORTER": "zipkin, console"}).exporters == ("console",)
