"""Declarative parameter schemas: every endpoint validates its parameters the same way.

A schema is an :class:`Obj` of fields. Validation turns the parsed form (strings, dicts, lists)
into typed Python values and rejects, as Stripe does:

* a key the schema does not know -> 400 ``parameter_unknown`` naming it
  (``Received unknown parameter: address[cty]``); nothing is ever silently ignored;
* a missing required key -> 400 ``parameter_missing``;
* an empty string for a field that cannot be unset -> 400 ``parameter_invalid_empty``
  (fields Stripe's OpenAPI spec marks as emptyable, such as ``metadata`` or ``address``, become
  :data:`UNSET` instead, meaning "clear this");
* a non-integer for an integer -> 400 ``parameter_invalid_integer``;
* a value outside an enum -> 400 ``Invalid <param>: must be one of ...`` (Stripe sends no
  ``code`` for a bad enum value).

Which fields exist and which are emptyable follows the ``stripe`` SDK's generated parameter
types (themselves generated from Stripe's OpenAPI spec) for API version 2026-10-28.endive,
restricted to what the emulator models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from stripe_emulator.errors import (
    invalid,
    parameter_invalid_empty,
    parameter_invalid_integer,
    parameter_missing,
    parameter_unknown,
)


class _Unset:
    """Marker for an emptyable parameter sent as ``""`` ("unset this field")."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()

_INTEGER = re.compile(r"-?\d+\Z")
_NUMBER = re.compile(r"-?(\d+(\.\d*)?|\.\d+)\Z")


def child(parent: str, key: str | int) -> str:
    """The wire name of a nested parameter: ``items[0][price]``."""
    return f"{parent}[{key}]" if parent else str(key)


class Field:
    """One parameter. ``parse`` receives the raw parsed-form value (never ``None``)."""

    def __init__(self, *, required: bool = False, emptyable: bool = False) -> None:
        self.required = required
        self.emptyable = emptyable

    def parse(self, raw: Any, param: str) -> Any:
        if raw == "":
            if self.emptyable:
                return UNSET
            raise parameter_invalid_empty(param)
        return self.convert(raw, param)

    def convert(self, raw: Any, param: str) -> Any:
        raise NotImplementedError


class Str(Field):
    def __init__(
        self,
        *,
        required: bool = False,
        emptyable: bool = False,
        max_length: int | None = None,
    ) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.max_length = max_length

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, str):
            raise invalid(f"Invalid string: {_describe(raw)}", param)
        if self.max_length is not None and len(raw) > self.max_length:
            raise invalid(
                f"Invalid string: {raw[:20]}...; must be at most {self.max_length} characters",
                param,
            )
        return raw


class Int(Field):
    def __init__(
        self,
        *,
        required: bool = False,
        emptyable: bool = False,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, str) or not _INTEGER.match(raw):
            raise parameter_invalid_integer(param, _describe(raw))
        value = int(raw)
        if self.minimum is not None and value < self.minimum:
            raise invalid(f"This value must be greater than or equal to {self.minimum}.", param)
        if self.maximum is not None and value > self.maximum:
            raise invalid(f"This value must be less than or equal to {self.maximum}.", param)
        return value


class Num(Field):
    """A decimal number (Stripe floats such as package dimensions)."""

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, str) or not _NUMBER.match(raw):
            raise invalid(f"Invalid decimal: {_describe(raw)}", param)
        return float(raw)


class IntOr(Field):
    """An integer (a timestamp) or one of a few words: ``trial_end=now``, ``cancel_at=...``."""

    def __init__(self, *words: str, required: bool = False, emptyable: bool = False) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.words = frozenset(words)
        self.ordered = words

    def convert(self, raw: Any, param: str) -> Any:
        if isinstance(raw, str) and raw in self.words:
            return raw
        if isinstance(raw, str) and _INTEGER.match(raw):
            return int(raw)
        raise invalid(
            f"Invalid {param}: must be an integer or one of {_one_of(self.ordered)}", param
        )


class Bool(Field):
    def convert(self, raw: Any, param: str) -> Any:
        if raw == "true":
            return True
        if raw == "false":
            return False
        raise invalid(f"Invalid boolean: {_describe(raw)}", param)


class Enum(Field):
    def __init__(self, *values: str, required: bool = False, emptyable: bool = False) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.values = frozenset(values)
        self.ordered = values

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, str) or raw not in self.values:
            raise invalid(f"Invalid {param}: must be one of {_one_of(self.ordered)}", param)
        return raw


class Metadata(Field):
    """Stripe metadata: up to 50 string keys (<= 40 chars) with values <= 500 chars.

    An empty value (``metadata[k]=``) means "remove k" and is returned as :data:`UNSET`.
    """

    def __init__(self) -> None:
        super().__init__(emptyable=True)

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, dict):
            raise invalid("Invalid hash", param)
        if len(raw) > 50:
            raise invalid("Metadata can have up to 50 keys.", param)
        result: dict[str, Any] = {}
        for key, value in raw.items():
            name = child(param, key)
            if not isinstance(value, str):
                raise invalid(f"Invalid value for {name}: metadata values must be strings", name)
            if len(key) > 40:
                raise invalid(
                    f"Metadata keys can have up to 40 characters; '{key}' has {len(key)}.", name
                )
            if len(value) > 500:
                raise invalid("Metadata values can have up to 500 characters.", name)
            result[key] = UNSET if value == "" else value
        return result


class Obj(Field):
    """A hash of known fields; unknown keys are rejected."""

    def __init__(
        self,
        fields: Mapping[str, Field],
        *,
        required: bool = False,
        emptyable: bool = False,
    ) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.fields = dict(fields)

    def convert(self, raw: Any, param: str) -> Any:
        if not isinstance(raw, dict):
            raise invalid("Invalid hash", param)
        return self.validate(raw, param)

    def validate(self, raw: Mapping[str, Any], param: str = "") -> dict[str, Any]:
        fields = self.fields
        for key in raw:
            if key not in fields:
                raise parameter_unknown(child(param, key))
        result: dict[str, Any] = {}
        for name, field in fields.items():
            value = raw.get(name)
            if value is None:
                if field.required:
                    raise parameter_missing(child(param, name))
                continue
            result[name] = field.parse(value, child(param, name))
        return result


class Arr(Field):
    """An array, sent either as ``a[]=x`` or with sequential explicit indices ``a[0]=x``."""

    def __init__(
        self,
        item: Field,
        *,
        required: bool = False,
        emptyable: bool = False,
        max_items: int | None = None,
    ) -> None:
        super().__init__(required=required, emptyable=emptyable)
        self.item = item
        self.max_items = max_items

    def convert(self, raw: Any, param: str) -> Any:
        if isinstance(raw, dict):
            raw = _indexed(raw, param)
        elif not isinstance(raw, list):
            raise invalid("Invalid array", param)
        if self.max_items is not None and len(raw) > self.max_items:
            raise invalid(f"Invalid array: must have at most {self.max_items} items", param)
        return [self.item.parse(value, child(param, index)) for index, value in enumerate(raw)]


class Range(Field):
    """A timestamp filter: an integer, or a hash of ``gt``/``gte``/``lt``/``lte`` integers."""

    _bounds = Obj({name: Int() for name in ("gt", "gte", "lt", "lte")})

    def convert(self, raw: Any, param: str) -> Any:
        if isinstance(raw, dict):
            return self._bounds.validate(raw, param)
        return {"eq": Int().convert(raw, param)}


def _indexed(raw: dict[str, Any], param: str) -> list[Any]:
    """Turn ``{"0": a, "1": b}`` into ``[a, b]``, with Stripe's rule on the keys."""
    values: list[Any] = []
    for expected, key in enumerate(sorted(raw, key=_index_order)):
        if key != str(expected):
            raise invalid(
                "Invalid array: when specifying an array with explicit keys (e.g. "
                "foo[0]=a&foo[1]=b) instead of as an array (e.g. foo[]=a&foo[]=b), the keys "
                f"must be numeric and sequential starting from 0. You passed the keys "
                f"`{', '.join(raw)}`, we expected to have a key with the value `{expected}`.",
                param,
            )
        values.append(raw[key])
    return values


def _index_order(key: str) -> tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 62, key)


def _one_of(values: tuple[str, ...]) -> str:
    if len(values) <= 2:
        return " or ".join(values)
    return ", ".join(values[:-1]) + f", or {values[-1]}"


def _describe(raw: Any) -> str:
    return raw if isinstance(raw, str) else "a hash" if isinstance(raw, dict) else "an array"


def schema(fields: Mapping[str, Field], *, expandable: bool = True) -> Obj:
    """An endpoint's root schema; every Stripe endpoint accepts ``expand[]``."""
    all_fields = dict(fields)
    if expandable:
        all_fields["expand"] = Arr(Str())
    return Obj(all_fields)


PAGINATION: Final[dict[str, Field]] = {
    "limit": Int(minimum=1, maximum=100),
    "starting_after": Str(),
    "ending_before": Str(),
}


def validate(root: Obj, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a request's parsed parameters against an endpoint schema."""
    return root.validate(raw)
