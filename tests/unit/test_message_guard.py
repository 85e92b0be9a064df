"""The broker guard's checks of a raw message, and the values a command log cannot keep."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.messaging.broker import Rejected, check_envelope
from domain.messages import command_fingerprint, storable, unstorable_values
from tests.support.raw_messages import REFUSED, envelope


@pytest.mark.parametrize("case", sorted(set(REFUSED) - {"unknown-task"}))
def test_a_message_that_is_no_task_message_is_rejected_with_a_reason(case: str) -> None:
    with pytest.raises(Rejected) as rejected:
        check_envelope(REFUSED[case])

    assert str(rejected.value)


def test_a_task_message_passes_whole() -> None:
    raw = envelope(kwargs={"user_id": "usr_1"})

    assert check_envelope(raw) == json.loads(raw)


def test_a_reply_to_a_control_command_is_only_checked_for_what_kombu_reads() -> None:
    reply = json.dumps({"body": "e30=", "properties": {"delivery_tag": "1"}}).encode()

    assert check_envelope(reply, task_message=False)["body"] == "e30="


@given(st.binary(max_size=400) | st.text(max_size=200).map(lambda body: envelope(body=body)))
def test_arbitrary_bytes_are_a_task_message_or_rejected_never_an_error(raw: bytes) -> None:
    with contextlib.suppress(Rejected):
        check_envelope(raw)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user_id": "a\x00b"}, "user_id"),
        ({"account": {"name": float("nan")}}, "account.name"),
        ({"tags": [1, float("-inf")]}, "tags[1]"),
        ({"user_id": "\ud800"}, "user_id"),
        ({"bad\x00key": 1}, "'bad\\x00key'"),
    ],
)
def test_values_no_database_keeps_are_named_by_their_path(
    payload: dict[str, object], field: str
) -> None:
    [(named, _)] = unstorable_values(payload)

    assert named == field
    assert unstorable_values(storable(payload)) == []


def test_a_fingerprint_tells_another_payload_or_type_from_a_redelivery() -> None:
    first = command_fingerprint("users.enable", {"command_id": "c", "user_id": "u1"})

    assert first == command_fingerprint("users.enable", {"user_id": "u1", "command_id": "c"})
    assert first != command_fingerprint("users.enable", {"command_id": "c", "user_id": "u2"})
    assert first != command_fingerprint(
        "billing.create_account", {"command_id": "c", "user_id": "u1"}
    )
