"""Input rules shared by every way in (the HTTP API, the queue and the command line), so an
email, a name or an id is valid or not whichever way it arrives (a currency's rules are in
``domain/billing/currencies.py``)."""

from __future__ import annotations

import re
import secrets
from typing import Annotated

from email_validator import EmailNotValidError, validate_email
from pydantic import AfterValidator, StringConstraints, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from domain.errors import InvalidArgument
from domain.messages import ResourceId

__all__ = [
    "EmailAddress",
    "Name",
    "ResourceId",
    "Slug",
    "checked_id",
    "checked_name",
    "new_id",
    "normalized_email",
]

_RESOURCE_ID: TypeAdapter[str] = TypeAdapter(ResourceId)

Name = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$"
    ),
]
"""A name people read (a client's, a title): 1 to 255 printable characters."""

_NAME: TypeAdapter[str] = TypeAdapter(Name)


def new_id(prefix: str) -> str:
    """A fresh id such as ``org_5f1c0a9e3b7d2c46`` (a valid :data:`ResourceId`)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def checked_id(value: str, field: str) -> str:
    """``value`` if it is a valid :data:`ResourceId` (as the API's paths take them), else an
    ``InvalidArgument`` naming ``field``."""
    try:
        return _RESOURCE_ID.validate_python(value)
    except ValidationError:
        raise InvalidArgument.for_fields(
            f"invalid {field} {value!r}: an id is 1 to 128 letters, digits and _ . : - "
            "starting with a letter or digit",
            [(field, "must be an id: letters, digits and _ . : -, at most 128")],
        ) from None


def normalized_email(value: str) -> str:
    """The address in its normalized form (no deliverability check), or a validation error."""
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise PydanticCustomError("email", f"not a valid email address: {error}") from None


EmailAddress = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=320),
    AfterValidator(normalized_email),
]
"""An email address, normalized (``Ada@Example.COM`` → ``Ada@example.com``)."""

_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _slug(value: str) -> str:
    if not _SLUG.fullmatch(value):
        raise PydanticCustomError(
            "slug", "must be letters, digits and _ . - (starting with a letter or digit)"
        )
    return value


Slug = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=255),
    AfterValidator(_slug),
]
"""A name that is also a handle (an organization's): letters, digits and ``_ . -``."""


def checked_name(value: str, field: str) -> str:
    """``value`` stripped, if it is a valid :data:`Name`, else an ``InvalidArgument``."""
    try:
        return _NAME.validate_python(value)
    except ValidationError:
        raise InvalidArgument.for_fields(
            f"invalid {field} {value!r}",
            [(field, "must be 1 to 255 printable characters")],
        ) from None
