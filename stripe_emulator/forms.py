"""Stripe's form encoding: ``application/x-www-form-urlencoded`` with bracket notation.

``address[city]=Berlin&items[0][price]=price_1&expand[]=customer`` becomes
``{"address": {"city": "Berlin"}, "items": {"0": {"price": "price_1"}}, "expand": ["customer"]}``.

Explicit indices stay dict keys here: whether ``{"0": ...}`` is an array or a map (``metadata[0]``
is a valid metadata key) is only known to the endpoint's parameter schema, which converts it
(see :mod:`stripe_emulator.params`). ``[]`` appends to a real list.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from stripe_emulator.errors import StripeError, invalid

FormValue = str | dict[str, Any] | list[Any]


def parse_form(raw: str) -> dict[str, Any]:
    """Parse a query string or form body into nested dicts and lists (values are strings)."""
    if not raw:
        return {}
    root: dict[str, Any] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        bracket = key.find("[")
        if bracket <= 0 or not key.endswith("]"):
            # The overwhelmingly common case: a plain key. Stripe keeps the last value.
            root[key] = value
            continue
        segments = _split_key(key, bracket)
        if segments is None:
            root[key] = value
            continue
        _assign(root, segments, value, key)
    return root


def _split_key(key: str, bracket: int) -> list[str] | None:
    segments = [key[:bracket]]
    position = bracket
    while position < len(key):
        if key[position] != "[":
            return None
        end = key.find("]", position)
        if end < 0:
            return None
        segments.append(key[position + 1 : end])
        position = end + 1
    return segments


def _assign(root: dict[str, Any], segments: list[str], value: str, key: str) -> None:
    node: dict[str, Any] | list[Any] = root
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        param = _param_name(segments[: index + 1])
        if isinstance(node, list):
            if segment != "":
                raise _mixed_array(param)
            if last:
                node.append(value)
                return
            # ``a[][b]=1`` starts a new element per occurrence, as Rack-style parsers do.
            child: dict[str, Any] = {}
            node.append(child)
            node = child
            continue
        if last:
            existing = node.get(segment)
            if isinstance(existing, (dict, list)):
                raise invalid(f"Invalid value for {param}: it is also used as a hash", param)
            node[segment] = value
            return
        next_segment = segments[index + 1]
        existing = node.get(segment)
        if existing is None:
            existing = [] if next_segment == "" else {}
            node[segment] = existing
        elif isinstance(existing, str):
            raise invalid(f"Invalid hash: {param} was also given as a plain value", param)
        elif isinstance(existing, list) != (next_segment == ""):
            # ``a[]`` appends to a list, ``a[0]`` indexes a hash: one key cannot be both.
            raise _mixed_array(param)
        node = existing
    raise AssertionError(f"unreachable: {key}")


def _param_name(segments: list[str]) -> str:
    return segments[0] + "".join(f"[{segment}]" for segment in segments[1:])


def _mixed_array(param: str) -> StripeError:
    return invalid(
        f"Invalid array: {param} mixes explicit indices (foo[0]=a) with appended values (foo[]=a).",
        param,
    )
