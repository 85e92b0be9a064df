"""Organizations (spec section 2.2)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import InvalidArgument

MAX_AVATAR_BYTES = 2 * 1024 * 1024
"""The spec's limit: the base64 avatar must be smaller than 2 MB (of image data)."""

_IMAGE_SIGNATURES = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",  # JPEG
    b"GIF87a",
    b"GIF89a",
    b"RIFF",  # WebP (RIFF....WEBP)
)


class OrganizationState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


def validate_avatar(avatar: str) -> str:
    """A base64-encoded PNG, JPEG, GIF or WebP image of less than 2 MB, or a 400."""
    try:
        image = base64.b64decode(avatar, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "must be base64-encoded")]
        ) from None
    if len(image) >= MAX_AVATAR_BYTES:
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "the image must be smaller than 2 MB")]
        )
    if not image.startswith(_IMAGE_SIGNATURES):
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "must be a PNG, JPEG, GIF or WebP image")]
        )
    return avatar


@dataclass
class Organization:
    id: str
    name: str
    title: str
    state: OrganizationState
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    avatar: str | None = None

    @property
    def is_enabled(self) -> bool:
        return self.state is OrganizationState.ENABLED

    def to_view(self) -> dict[str, Any]:
        """The organization object of the API (spec section 2.2)."""
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "state": self.state.value,
            "avatar": self.avatar or "",
        }
