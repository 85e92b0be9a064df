"""The provider-call recorder's table (``application/provider_calls.py``) holds to the provider
port: one rule per port method, read from the Protocol itself. What the rules record is shown
on the real adapter in ``tests/integration/test_provider_call_records.py``."""

from __future__ import annotations

import inspect

import pytest

from application.provider_calls import RECORDINGS, RecordedProvider, Recording, check_recordings
from domain.ports.provider import BillingProvider


def protocol_methods() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(BillingProvider, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_method_of_the_provider_port_has_a_recording_rule() -> None:
    assert protocol_methods() == set(RECORDINGS)
    assert len(RECORDINGS) >= 14


def test_a_port_method_without_a_rule_is_refused_by_name() -> None:
    without = {name: rule for name, rule in RECORDINGS.items() if name != "preview_change"}

    with pytest.raises(TypeError, match="preview_change"):
        check_recordings(without)


def test_a_rule_for_no_port_method_or_naming_a_missing_key_argument_is_refused() -> None:
    with pytest.raises(TypeError, match="refund_invoice"):
        check_recordings({**RECORDINGS, "refund_invoice": Recording(lambda arguments: None)})
    with pytest.raises(TypeError, match="request_key"):
        check_recordings(
            {**RECORDINGS, "create_customer": Recording(lambda arguments: None, "request_key")}
        )


def test_each_write_of_the_port_is_recorded_with_the_argument_that_carries_its_key() -> None:
    writes = {
        name
        for name in protocol_methods()
        if "idempotency_key" in inspect.signature(getattr(BillingProvider, name)).parameters
    }
    keyed = {name for name, rule in RECORDINGS.items() if rule is not None and rule.key}

    assert (
        writes
        == keyed
        == {
            "create_customer",
            "create_plan_price",
            "create_subscription",
            "change_subscription_price",
        }
    )


@pytest.mark.parametrize("method", sorted(RECORDINGS))
def test_the_recorders_methods_read_as_the_ports(method: str) -> None:
    forward = getattr(RecordedProvider, method)

    assert inspect.signature(forward) == inspect.signature(getattr(BillingProvider, method))
    assert forward.__doc__ == getattr(BillingProvider, method).__doc__
