"""Reading what an error says about the fields it refuses: the spec's error body (over HTTP,
or a ``CommandError`` before it is sent) and pydantic's validation errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from domain.errors import CommandError


def field_violations(error: CommandError | Mapping[str, Any]) -> dict[str, str]:
    """Field → description of each field violation in the error's details (its
    ``google.rpc.BadRequest``), from an error body or a ``CommandError``."""
    details = error.details if isinstance(error, CommandError) else error["details"]
    return {
        violation["field"]: violation["description"]
        for detail in details
        for violation in detail.get("fieldViolations", [])
    }


def validation_messages(error: pytest.ExceptionInfo[ValidationError]) -> dict[tuple[Any, ...], str]:
    """Location → message of each of pydantic's validation errors."""
    return {item["loc"]: item["msg"] for item in error.value.errors()}
