"""A command's errors name the command's fields; the API renames them for its HTTP answer."""

from __future__ import annotations

from domain.errors import InvalidArgument, error_info
from worker.api.gateway import in_request_terms, request_field

CREATE_ROUTE = {"account": "body"}
CHANGE_ROUTE = {"subscription_id": "id", "plan": "plan_change.plan"}


def test_a_nested_command_field_is_renamed_by_its_first_part() -> None:
    assert request_field("account.tax_data[0].id", CREATE_ROUTE) == "body.tax_data[0].id"
    assert request_field("account", CREATE_ROUTE) == "body"
    assert request_field("plan", CHANGE_ROUTE) == "plan_change.plan"


def test_a_field_the_route_does_not_rename_is_kept() -> None:
    assert request_field("offline", CREATE_ROUTE) == "offline"
    assert request_field("accounts.x", CREATE_ROUTE) == "accounts.x"


def test_field_violations_and_an_error_infos_field_are_renamed_and_the_rest_kept() -> None:
    error = InvalidArgument.for_fields("bad", [("plan", "is the current plan"), ("colour", "x")])
    details = [*error.details, error_info("PLAN_NOT_AVAILABLE", plan_id="plan_1", field="plan")]

    renamed = in_request_terms(details, CHANGE_ROUTE)

    assert [v["field"] for v in renamed[0]["fieldViolations"]] == ["plan_change.plan", "colour"]
    assert renamed[0]["fieldViolations"][0]["description"] == "is the current plan"
    assert renamed[1]["metadata"] == {"plan_id": "plan_1", "field": "plan_change.plan"}
    assert [v["field"] for v in details[0]["fieldViolations"]] == ["plan", "colour"]
