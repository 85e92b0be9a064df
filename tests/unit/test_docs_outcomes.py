"""The pages a publisher reads say what an invalid message becomes: a `rejected` command (the
caller's mistake), as the runner records it (domain/operations/outcomes.py), never `failed`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from domain.errors import ErrorCode
from domain.operations.outcomes import ended_as

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("docs/reference/messages.md", "docs/how-to/publish-commands.md")
RECORDED_AS = re.compile(r"(?:recorded|journalled)[^.]*?as\s+(?:a\s+)?`(\w+)`", re.DOTALL)


def test_an_invalid_message_ends_rejected() -> None:
    body = {"code": int(ErrorCode.INVALID_ARGUMENT), "message": "invalid", "details": []}

    assert ended_as(body).value == "rejected"


@pytest.mark.parametrize("page", PAGES)
def test_the_publisher_s_pages_say_invalid_messages_are_recorded_rejected(page: str) -> None:
    said = RECORDED_AS.findall((ROOT / page).read_text())

    assert said
    assert set(said) == {"rejected"}, said
