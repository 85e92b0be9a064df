from __future__ import annotations

import pytest

from domain.errors import (
    AlreadyExists,
    CommandError,
    ErrorCode,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from worker.api.errors import HTTP_STATUS


def test_an_error_body_has_the_spec_fields_and_typed_details() -> None:
    body = InvalidArgument.for_fields("bad", [("email", "not an email")]).to_body()
    assert body == {
        "code": 3,
        "message": "bad",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": "email", "description": "not an email"}],
            }
        ],
    }


def test_a_recorded_error_comes_back_with_its_code() -> None:
    original = NotFound.resource("user", "usr_1")
    again = CommandError.from_body(original.to_body())
    assert again.code is ErrorCode.NOT_FOUND
    assert again.to_body() == original.to_body()


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidArgument("x"), 400),
        (FailedPrecondition("x"), 400),
        (NotFound("x"), 404),
        (AlreadyExists("x"), 409),
    ],
)
def test_codes_map_to_http_statuses_as_grpc_gateway_does(error: CommandError, status: int) -> None:
    assert HTTP_STATUS[error.code] == status


def test_every_code_has_an_http_status() -> None:
    assert set(HTTP_STATUS) == set(ErrorCode)
