from __future__ import annotations

import base64

import pytest

from domain.errors import InvalidArgument
from domain.organizations import MAX_AVATAR_BYTES, validate_avatar

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def test_a_small_png_avatar_is_accepted() -> None:
    encoded = base64.b64encode(PNG).decode()
    assert validate_avatar(encoded) == encoded


@pytest.mark.parametrize(
    ("avatar", "reason"),
    [
        ("not base64!", "base64"),
        (base64.b64encode(b"plain text").decode(), "image"),
        (base64.b64encode(PNG + b"\x00" * MAX_AVATAR_BYTES).decode(), "2 MB"),
    ],
)
def test_an_avatar_that_is_not_a_small_base64_image_is_rejected(avatar: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_avatar(avatar)
    violation = caught.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "avatar"
    assert reason in violation["description"]
