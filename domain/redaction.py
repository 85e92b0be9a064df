"""Which values are personal data, and how each is masked wherever it is shown.

Flower, Celery's events, the result backend and log lines show commands' arguments and
results; the command log keeps them whole. What is shown goes through :func:`redact` (a
structure: kwargs, a result, an error body) or :func:`mask_text` (free text: a log message, an
exception's message). The rules are by field name, wherever the field sits:

* ``email``: the first character of the local part and the domain (``b***@acme.example``);
* ``phone``: the first three and last three characters (``+44*******958``);
* ``address``: every line, city, state and postal code as its first character (``1***``);
  the country stays;
* ``tax_data`` / ``tax_ids``: each entry's ``id`` keeps its first two and last two characters
  (``GB*******89``); the type stays;
* ``name``: its first character (``A***``) in a mapping that also holds an ``email`` or a
  ``phone`` (a billing account, its details, a user); an organization's or a plan's name stays;
* any other string: emails and international phone numbers found in it are masked, and the
  user information of a URL in it (``https://***@host:8443/path``: a user and a password, or
  an email as a user name) is stars, the rest of the URL left readable.

Every mask is idempotent (masking a masked value changes nothing) and never longer than
needed to tell values apart at a glance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

STARS = "***"

# Local parts as people have them (quotes, slashes… left out: they delimit an address in a
# repr or a message); ``*`` in, so that a masked address masks to itself.
_EMAIL = re.compile(r"[A-Za-z0-9._%+*-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
# A URL's user information: after the scheme, up to the last ``@`` of the authority (which
# ends at the path, the query, the fragment or a space). Matched in the same pass as emails
# and before them, so that ``user:pass@host`` is not read as an address ``pass@host``.
_URL_USERINFO = r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#]*@"
_USERINFO_OR_EMAIL = re.compile(f"{_URL_USERINFO}|{_EMAIL.pattern}")
# International numbers (E.164, as phones are stored, or written with spaces and dashes): a
# plus sign and 8 to 15 digits. Ids, amounts and times never start with a plus sign.
_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ \-]?\d){6,14}(?!\d)")


def mask_value(value: str) -> str:
    """``Acme Ltd`` → ``A***``: the first character, then stars."""
    if not value:
        return value
    return value[:1] + STARS


def mask_email(value: str) -> str:
    """``billing@acme.example`` → ``b***@acme.example``."""
    local, at, domain = value.rpartition("@")
    if not at or not local:
        return mask_value(value)
    return f"{mask_value(local)}@{domain}"


def mask_phone(value: str) -> str:
    """``+447700900958`` → ``+44*******958``: as long as the number, its country code and last
    three digits kept."""
    if len(value) <= 6:
        return STARS if value else value
    return value[:3] + "*" * (len(value) - 6) + value[-3:]


def mask_tax_id(value: str) -> str:
    """``GB123456789`` → ``GB*******89``."""
    if len(value) <= 4:
        return STARS if value else value
    return value[:2] + "*" * (len(value) - 4) + value[-2:]


def mask_text(text: str) -> str:
    """``text`` with every email address and international phone number in it masked, and
    the user information of every URL in it."""
    if "@" in text:
        text = _USERINFO_OR_EMAIL.sub(_masked_userinfo_or_email, text)
    if "+" in text:
        text = _PHONE.sub(lambda found: mask_phone(found.group(0)), text)
    return text


def _masked_userinfo_or_email(found: re.Match[str]) -> str:
    scheme = found.group("scheme")
    if scheme is not None:
        return f"{scheme}{STARS}@"
    return mask_email(found.group(0))


_ADDRESS_KEPT = frozenset({"country"})


def _masked_address(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: item if key in _ADDRESS_KEPT or not isinstance(item, str) else mask_value(item)
            for key, item in value.items()
        }
    return _masked_string(value, mask_value)


def _masked_tax_entries(value: Any) -> Any:
    if isinstance(value, list):
        return [
            {**entry, "id": _masked_string(entry["id"], mask_tax_id)}
            if isinstance(entry, Mapping) and "id" in entry
            else redact(entry)
            for entry in value
        ]
    return redact(value)


def _masked_string(value: Any, mask: Callable[[str], str]) -> Any:
    return mask(value) if isinstance(value, str) else redact(value)


PERSONAL_FIELDS: Mapping[str, Callable[[Any], Any]] = {
    "email": lambda value: _masked_string(value, mask_email),
    "phone": lambda value: _masked_string(value, mask_phone),
    "address": _masked_address,
    "postal_code": lambda value: _masked_string(value, mask_value),
    "tax_data": _masked_tax_entries,
    "tax_ids": _masked_tax_entries,
}
"""Field names whose values are personal wherever they appear, and how each is masked."""

CONTACT_FIELDS = frozenset({"email", "phone"})
"""A mapping holding one of these describes a person or an account: its ``name`` is masked."""


def redact(value: Any) -> Any:
    """A copy of ``value`` (JSON-like: mappings, lists, tuples, strings, numbers) with personal
    data masked by the rules above; the original is left as it was."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        is_contact = any(key in CONTACT_FIELDS for key in value)
        masked: dict[Any, Any] = {}
        for key, item in value.items():
            rule = PERSONAL_FIELDS.get(key) if isinstance(key, str) else None
            if rule is not None:
                masked[key] = rule(item)
            elif key == "name" and is_contact and isinstance(item, str):
                masked[key] = mask_value(item)
            else:
                masked[key] = redact(item)
        return masked
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact(item) for item in value)
    return value
