from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from domain.billing.organizations import MAX_AVATAR_CHARACTERS, validate_avatar
from domain.errors import InvalidArgument


def image(image_format: str = "PNG", size: tuple[int, int] = (8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, "teal").save(buffer, format=image_format)
    return buffer.getvalue()


PNG = image()


def test_a_small_png_avatar_is_accepted() -> None:
    encoded = base64.b64encode(PNG).decode()
    assert validate_avatar(encoded) == encoded


@pytest.mark.parametrize(
    ("avatar", "reason"),
    [
        ("not base64!", "base64"),
        (base64.b64encode(b"plain text").decode(), "image"),
        ("A" * MAX_AVATAR_CHARACTERS, "2,000,000 characters"),
        # The signature of a PNG, and nothing of a PNG after it.
        (base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode(), "image"),
        (base64.b64encode(image("BMP")).decode(), "image"),
    ],
)
def test_an_avatar_that_is_not_a_small_base64_image_is_rejected(avatar: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_avatar(avatar)
    violation = caught.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "avatar"
    assert reason in violation["description"]


@pytest.mark.parametrize("image_format", ["PNG", "JPEG", "GIF", "WEBP"])
def test_each_image_format_of_the_spec_is_accepted(image_format: str) -> None:
    encoded = base64.b64encode(image(image_format)).decode()

    assert validate_avatar(encoded) == encoded


def test_the_limit_counts_the_base64_characters_not_the_decoded_bytes() -> None:
    # 1.6 MB of image data is 2.1 million base64 characters: over the spec's limit.
    encoded = base64.b64encode(PNG + b"\x00" * 1_600_000).decode()

    with pytest.raises(InvalidArgument):
        validate_avatar(encoded)
