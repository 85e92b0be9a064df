"""What Celery shows of a task message's arguments (adapters/messaging/masking.py)."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from celery.utils.saferepr import saferepr
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.messaging import masking
from adapters.messaging.masking import (
    REPR_MAX_SIZE,
    mask_argument_reprs,
    masked_repr,
    message_log_fields,
)
from domain.redaction import redact

KWARGS = {
    "command_id": "c-1",
    "org_id": "org_1",
    "account": {"name": "Ada Lovelace", "email": "ada@acme.example", "phone": "+442079460958"},
}


def test_our_publishers_write_masked_argument_reprs_and_sent_events() -> None:
    app = Celery("unit-tests", set_as_current=False, amqp="adapters.messaging.masking:MaskingAMQP")
    try:
        message: Any = app.amqp.create_task_message(
            "task-1", "billing.create_account", (), KWARGS, create_sent_event=True
        )
    finally:
        app.close()

    for shown in (message.headers["kwargsrepr"], message.sent_event["kwargs"]):
        assert "ada@acme.example" not in shown
        assert "Ada Lovelace" not in shown
        assert "'a***@acme.example'" in shown
    assert message.body[1] == KWARGS  # the message itself is whole


def test_a_received_message_s_reprs_are_rewritten_whatever_its_publisher_wrote() -> None:
    headers: dict[str, Any] = {"id": "task-1", "task": "billing.create_account"}
    headers["kwargsrepr"] = repr(KWARGS)  # as a plain Celery client writes it

    mask_argument_reprs(headers, [], KWARGS)

    assert "ada@acme.example" not in headers["kwargsrepr"]
    assert "+44*******958" in headers["kwargsrepr"]
    assert headers["argsrepr"] == "[]"


def test_a_received_message_names_its_command_for_the_log() -> None:
    fields = message_log_fields({"id": "task-1", "task": "users.enable", "retries": 2}, KWARGS)

    assert fields == {
        "command_id": "c-1",
        "task": "users.enable",
        "task_id": "task-1",
        "attempt": 3,
        "org_id": "org_1",
    }
    assert message_log_fields({"id": "task-2", "task": "t"}, {})["command_id"] == "task-2"


_scalars = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
)
_arguments = st.recursive(
    st.one_of(_scalars, st.text(max_size=1_200)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["email", "name", "user_id"]), st.text(max_size=8), st.integers()
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=12,
)


@given(_arguments)
@example(["\\"])  # found by hypothesis: saferepr writes a backslash as it is
@example(["'"])  # and quotes a lone single quote otherwise than repr
def test_the_masked_repr_is_celery_s_saferepr_of_the_masked_arguments(arguments: Any) -> None:
    assert masked_repr(arguments) == saferepr(redact(arguments), REPR_MAX_SIZE)


def test_a_command_s_flat_arguments_are_shown_without_celery_s_saferepr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """saferepr costs about 35 µs a call, and a message's two reprs are written by its
    publisher and again by the worker that takes it; a flat dict's plain repr is the same."""
    calls: list[object] = []

    def counting(value: object, maxlen: int) -> str:
        calls.append(value)
        return saferepr(value, maxlen)

    monkeypatch.setattr(masking, "saferepr", counting)
    headers: dict[str, Any] = {}

    mask_argument_reprs(headers, (), {"command_id": "c-1", "user_id": "usr_1", "version": 1})
    assert calls == []
    mask_argument_reprs(headers, (), KWARGS)  # nested: the account's fields
    assert len(calls) == 1
