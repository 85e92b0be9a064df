"""The strict body reader names every field it refuses at once."""

from __future__ import annotations

import pytest

from worker.api.strict_json import BodyRejected, parse_object

NO_CONTROL = "control characters (U+0000 to U+001F) are not allowed"


def test_every_field_holding_a_control_character_is_named_at_once() -> None:
    raw = b'{"name": "a\\u0000b", "address": {"city": "x\\u001by"}, "ok": "fine"}'

    with pytest.raises(BodyRejected) as rejected:
        parse_object(raw)

    assert rejected.value.message == "2 fields hold control characters"
    assert rejected.value.violations == [("address.city", NO_CONTROL), ("name", NO_CONTROL)]


def test_one_field_holding_a_control_character_is_named_alone() -> None:
    with pytest.raises(BodyRejected) as rejected:
        parse_object(b'{"name": "a\\u0007"}')

    assert rejected.value.message == "a field holds a control character"
    assert rejected.value.violations == [("name", NO_CONTROL)]
