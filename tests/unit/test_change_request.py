"""How a change request body is resolved into the change command's fields (spec 4.3 and 9)."""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import ErrorCode, InvalidArgument
from tests.support.errors import field_violations
from worker.api.change_request import resolve_change_request

RESOLVED = [
    pytest.param(
        {"plan_change": {"plan": "team"}},
        ("team", False, False, False, "plan_change.plan"),
        id="plan-change-defaults-to-the-period-end",
    ),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": True}},
        ("team", True, False, False, "plan_change.plan"),
        id="plan-change-immediate",
    ),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": False}},
        ("team", False, False, False, "plan_change.plan"),
        id="plan-change-at-period-end",
    ),
    pytest.param(
        {"plan": "team"},
        ("team", False, False, True, "plan"),
        id="deprecated-plan-alone",
    ),
    pytest.param(
        {"plan": "team", "immediate": True},
        ("team", True, False, True, "plan"),
        id="deprecated-plan-and-immediate",
    ),
    pytest.param(
        {"plan": "plan_abc", "immediate": False},
        ("plan_abc", False, False, True, "plan"),
        id="deprecated-plan-by-id",
    ),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": True}, "plan": "team", "immediate": True},
        ("team", True, False, True, "plan_change.plan"),
        id="deprecated-fields-agreeing-with-plan-change",
    ),
    pytest.param(
        {"plan_change": {"plan": "team"}, "immediate": False},
        ("team", False, False, True, "plan_change.plan"),
        id="deprecated-immediate-agreeing-with-the-default",
    ),
    pytest.param(
        {"phase_change": {"cancel_upcoming_changes": True}},
        (None, False, True, False, "plan"),
        id="cancel-upcoming-changes",
    ),
    pytest.param(
        {"plan_change": {"plan": "team"}, "phase_change": {"cancel_upcoming_changes": False}},
        ("team", False, False, False, "plan_change.plan"),
        id="plan-change-with-cancel-false",
    ),
    pytest.param(
        {"plan_change": None, "plan": "team"},
        ("team", False, False, True, "plan"),
        id="null-plan-change-is-absent",
    ),
    pytest.param(
        {"plan": None, "immediate": None, "plan_change": {"plan": "team"}},
        ("team", False, False, False, "plan_change.plan"),
        id="null-deprecated-fields-are-absent",
    ),
]


@pytest.mark.parametrize(("body", "expected"), RESOLVED)
def test_a_valid_request_resolves_to_the_commands_fields(
    body: dict[str, Any], expected: tuple[str | None, bool, bool, bool, str]
) -> None:
    resolved = resolve_change_request(body)

    plan_ref, immediate, cancel, deprecated, plan_field = expected
    assert resolved.plan == plan_ref
    assert resolved.immediate is immediate
    assert resolved.cancel_upcoming_changes is cancel
    assert resolved.used_deprecated_fields is deprecated
    assert resolved.command_fields() == {
        "plan": plan_ref,
        "immediate": immediate,
        "cancel_upcoming_changes": cancel,
    }
    if plan_ref is not None:
        assert resolved.plan_field == plan_field
    assert resolved.field_names()["plan"] == plan_field


REJECTED = [
    pytest.param({}, "plan_change", id="nothing-requested"),
    pytest.param(
        {"phase_change": {"cancel_upcoming_changes": False}}, "plan_change", id="cancel-false"
    ),
    pytest.param({"phase_change": {}}, "plan_change", id="empty-phase-change"),
    pytest.param({"phase_change": None}, "plan_change", id="null-phase-change"),
    pytest.param({"immediate": True}, "immediate", id="deprecated-immediate-alone"),
    pytest.param({"plan_change": {}}, "plan_change.plan", id="plan-change-without-plan"),
    pytest.param(
        {"plan_change": {"immediate": True}}, "plan_change.plan", id="plan-change-immediate-only"
    ),
    pytest.param({"plan_change": {"plan": "team"}, "plan": "scale"}, "plan", id="plans-contradict"),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": True}, "immediate": False},
        "immediate",
        id="immediate-contradicts",
    ),
    pytest.param(
        {"plan_change": {"plan": "team"}, "immediate": True},
        "immediate",
        id="immediate-contradicts-the-default",
    ),
    pytest.param(
        {"plan_change": {"plan": "team"}, "phase_change": {"cancel_upcoming_changes": True}},
        "phase_change.cancel_upcoming_changes",
        id="plan-change-and-cancel",
    ),
    pytest.param(
        {"plan": "team", "phase_change": {"cancel_upcoming_changes": True}},
        "phase_change.cancel_upcoming_changes",
        id="deprecated-plan-and-cancel",
    ),
    pytest.param({"plan_change": {"plan": "team"}, "extra": 1}, "extra", id="unknown-field"),
    pytest.param(
        {"plan_change": {"plan": "team", "when": "now"}},
        "plan_change.when",
        id="unknown-plan-change-field",
    ),
    pytest.param(
        {"phase_change": {"cancel_upcoming_changes": True, "also": 1}},
        "phase_change.also",
        id="unknown-phase-change-field",
    ),
    pytest.param({"plan_change": "team"}, "plan_change", id="plan-change-not-an-object"),
    pytest.param({"phase_change": True}, "phase_change", id="phase-change-not-an-object"),
    pytest.param({"plan": 42}, "plan", id="plan-not-a-string"),
    pytest.param({"plan": ""}, "plan", id="plan-empty"),
    pytest.param({"plan_change": {"plan": "a b"}}, "plan_change.plan", id="plan-malformed"),
    pytest.param({"plan": "x" * 129}, "plan", id="plan-too-long"),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": "yes"}},
        "plan_change.immediate",
        id="immediate-not-a-boolean",
    ),
    pytest.param({"plan": "team", "immediate": 1}, "immediate", id="deprecated-immediate-int"),
    pytest.param(
        {"phase_change": {"cancel_upcoming_changes": "true"}},
        "phase_change.cancel_upcoming_changes",
        id="cancel-not-a-boolean",
    ),
]


@pytest.mark.parametrize(("body", "field"), REJECTED)
def test_an_invalid_request_is_a_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        resolve_change_request(body)

    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert field in field_violations(raised.value), field_violations(raised.value)


def test_every_problem_of_a_request_is_listed() -> None:
    with pytest.raises(InvalidArgument) as raised:
        resolve_change_request({"plan": 1, "immediate": "no", "colour": "red"})

    assert set(field_violations(raised.value)) == {"plan", "immediate", "colour"}


def test_contradicting_plans_and_immediates_are_both_reported() -> None:
    with pytest.raises(InvalidArgument) as raised:
        resolve_change_request(
            {"plan_change": {"plan": "team", "immediate": True}, "plan": "x", "immediate": False}
        )

    assert set(field_violations(raised.value)) == {"plan", "immediate"}


def test_an_unknown_field_is_listed_beside_what_else_is_wrong_with_the_request() -> None:
    with pytest.raises(InvalidArgument) as raised:
        resolve_change_request({"colour": "red", "plan_change": {"immediate": True, "when": "now"}})

    assert field_violations(raised.value) == {
        "colour": "unknown field",
        "plan_change.when": "unknown field",
        "plan_change.plan": "required: the plan to change to",
    }
