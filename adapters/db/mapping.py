"""Rows mapped once: an entity is copied to and from its table row field by field, each
field's conversion derived from the entity's own type hints.

So a new column is written in two places, the model (``models.py``) and its migration, and
the entity's field of the same name is all the mapping needs. A field with no column, or a
column with no field, is refused when the mapping is built, at import, not at the first write.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import inspect

from adapters.db.models import Base

E = TypeVar("E")
R = TypeVar("R", bound=Base)

Convert = Callable[[Any], Any]

# Written when the row is inserted and never again.
_IMMUTABLE = frozenset({"id", "created_at"})


def _as_is(value: Any) -> Any:
    return value


def _without_none(hint: Any) -> Any:
    """``X | None`` as ``X``: a ``None`` is stored and read as ``None`` whatever ``X`` is."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        present = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(present) == 1:
            return present[0]
    return hint


def _none_passes(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _conversions(hint: Any) -> tuple[Convert, Convert]:
    """(to the row, to the entity) for a field of this type."""
    hint = _without_none(hint)
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        enum_type = hint
        return _none_passes(lambda value: value.value), _none_passes(enum_type)
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        model = hint
        return (
            _none_passes(lambda value: value.model_dump()),
            lambda value: model.model_validate(value or {}),
        )
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        item_to_row, item_to_entity = _conversions(item)
        return (
            _none_passes(lambda values: [item_to_row(value) for value in values]),
            lambda values: [item_to_entity(value) for value in values or []],
        )
    if origin is dict or hint is dict:
        return _none_passes(dict), lambda value: dict(value or {})
    return _as_is, _as_is


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    attribute: str
    to_row: Convert
    to_entity: Convert


class RowMapping(Generic[E, R]):
    """Copies a dataclass entity to and from its row.

    A row attribute with a trailing underscore (``metadata_``, where SQLAlchemy reserves the
    plain name) stands for the field without it. Enums are stored by value, pydantic models
    (and lists of them) as their JSON dump, dicts as copies; other values as they are.
    """

    def __init__(self, entity_type: type[E], row_type: type[R]) -> None:
        if not dataclasses.is_dataclass(entity_type):
            raise TypeError(f"{entity_type.__name__} is not a dataclass")
        self.entity_type = entity_type
        self.row_type = row_type
        columns = {attribute.key for attribute in inspect(row_type).column_attrs}
        hints = typing.get_type_hints(entity_type)
        fields: list[_Field] = []
        for field in dataclasses.fields(entity_type):
            attribute = field.name if field.name in columns else f"{field.name}_"
            if attribute not in columns:
                raise TypeError(f"{row_type.__name__} has no column for {field.name!r}")
            to_row, to_entity = _conversions(hints[field.name])
            fields.append(_Field(field.name, attribute, to_row, to_entity))
        unmapped = columns - {field.attribute for field in fields}
        if unmapped:
            raise TypeError(f"{entity_type.__name__} has no field for {sorted(unmapped)}")
        self._fields = tuple(fields)

    def entity(self, row: R) -> E:
        values = {
            field.name: field.to_entity(getattr(row, field.attribute)) for field in self._fields
        }
        return self.entity_type(**values)

    def new_row(self, entity: E) -> R:
        row = self.row_type()
        for field in self._fields:
            setattr(row, field.attribute, field.to_row(getattr(entity, field.name)))
        return row

    def copy(self, entity: E, row: R) -> None:
        """Every column but those written once (``id``, ``created_at``)."""
        for field in self._fields:
            if field.name not in _IMMUTABLE:
                setattr(row, field.attribute, field.to_row(getattr(entity, field.name)))
