"""Organizations (spec section 2.2)."""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from PIL import Image
from pydantic import Field, StringConstraints

from domain.errors import InvalidArgument
from domain.messages import Message, ResourceId
from domain.rules import Slug

MAX_AVATAR_CHARACTERS = 2_000_000
"""The spec's limit: the base64 avatar string must be smaller than 2 MB (2,000,000 characters;
about 1.5 MB of image)."""

AVATAR_FORMATS = frozenset({"PNG", "JPEG", "GIF", "WEBP"})


class OrganizationState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


def validate_avatar(avatar: str) -> str:
    """A base64-encoded PNG, JPEG, GIF or WebP image in a string of less than 2,000,000
    characters, whose header decodes as that image (not only its first bytes), or a 400."""
    if len(avatar) >= MAX_AVATAR_CHARACTERS:
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "must be smaller than 2 MB (2,000,000 characters)")]
        )
    try:
        image = base64.b64decode(avatar, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "must be base64-encoded")]
        ) from None
    try:
        with Image.open(io.BytesIO(image)) as opened:
            image_format = opened.format
            opened.verify()
    except Exception:  # Pillow raises many kinds for a header that does not decode
        image_format = None
    if image_format not in AVATAR_FORMATS:
        raise InvalidArgument.for_fields(
            "invalid avatar", [("avatar", "must be a PNG, JPEG, GIF or WebP image")]
        )
    return avatar


class NewOrganization(Message):
    """An organization as an operator describes it (``billing-worker orgs create``)."""

    name: Slug
    title: Annotated[str, StringConstraints(strip_whitespace=True, max_length=255)] = ""
    id: ResourceId | None = Field(default=None, description="Default: a new org_… id.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    avatar: str | None = Field(default=None, description="A base64-encoded image.")
    disabled: bool = False


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

    @classmethod
    def new(cls, org_id: str, spec: NewOrganization, now: datetime) -> Organization:
        """The organization ``spec`` describes (its avatar checked), titled by its name unless
        it has a title."""
        return cls(
            id=org_id,
            name=spec.name,
            title=spec.title or spec.name,
            state=OrganizationState.DISABLED if spec.disabled else OrganizationState.ENABLED,
            created_at=now,
            updated_at=now,
            metadata=dict(spec.metadata),
            avatar=validate_avatar(spec.avatar) if spec.avatar else None,
        )

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
