"""The body of ``POST …/subscriptions/{id}/change`` (spec 4.3 and 9) resolved into the fields
of :class:`~domain.subscriptions.change_commands.ChangeSubscriptionPlan`.

The request has two spellings of a plan change (``plan_change.plan`` and the deprecated
top-level ``plan``/``immediate``) and a ``phase_change``; the command has one flat set of
fields. This module maps the one to the other, and back for the command's errors
(:meth:`ChangeRequest.field_names`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.errors import InvalidArgument
from domain.messages import is_id

REQUEST_FIELDS = frozenset({"plan", "immediate", "plan_change", "phase_change"})
PLAN_CHANGE_FIELDS = frozenset({"plan", "immediate", "proration_date"})
PHASE_CHANGE_FIELDS = frozenset({"cancel_upcoming_changes"})


@dataclass(frozen=True)
class ChangeRequest:
    """A change request body resolved into the command's fields.

    ``plan_field`` names where the plan came from (``plan_change.plan`` or the deprecated
    ``plan``), so that the command's errors about its ``plan`` name the field the caller sent.
    """

    plan: str | None
    immediate: bool
    cancel_upcoming_changes: bool
    used_deprecated_fields: bool
    plan_field: str = "plan_change.plan"
    proration_date: str | None = None

    def command_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "plan": self.plan,
            "immediate": self.immediate,
            "cancel_upcoming_changes": self.cancel_upcoming_changes,
        }
        if self.proration_date is not None:
            fields["proration_date"] = self.proration_date
        return fields

    def field_names(self) -> dict[str, str]:
        """The request's name for each field of the command it became."""
        return {
            "plan": self.plan_field,
            "immediate": "plan_change.immediate",
            "cancel_upcoming_changes": "phase_change.cancel_upcoming_changes",
            "proration_date": "plan_change.proration_date",
        }


def resolve_change_request(body: Mapping[str, Any]) -> ChangeRequest:
    """Resolve a change request body (spec 4.3), or raise a 400 listing every problem.

    * ``plan_change`` decides when present. The deprecated top-level ``plan`` and
      ``immediate`` may come along only if they agree with it (``plan_change.immediate``
      defaults to ``false``).
    * Without ``plan_change`` the deprecated fields are honoured; ``immediate`` alone is not a
      request.
    * ``phase_change.cancel_upcoming_changes: true`` cancels the pending change; it cannot be
      combined with a plan change.
    * Something must be requested. Unknown fields, wrong types and ``null`` objects' unknown
      members are errors; a ``null`` value counts as absent.
    """
    # Unknown fields are listed with every other violation, not instead of them.
    unknown = [(name, "unknown field") for name in sorted(set(body) - REQUEST_FIELDS)]
    violations: list[tuple[str, str]] = []
    plan_change = _object(body, "plan_change", PLAN_CHANGE_FIELDS, violations, unknown)
    phase_change = _object(body, "phase_change", PHASE_CHANGE_FIELDS, violations, unknown)
    legacy_plan = _plan(body.get("plan"), "plan", violations)
    legacy_immediate = _bool(body.get("immediate"), "immediate", violations)
    new_plan = _plan(plan_change.get("plan"), "plan_change.plan", violations)
    new_immediate = _bool(plan_change.get("immediate"), "plan_change.immediate", violations)
    proration_date = _timestamp(
        plan_change.get("proration_date"), "plan_change.proration_date", violations
    )
    cancel = _bool(
        phase_change.get("cancel_upcoming_changes"),
        "phase_change.cancel_upcoming_changes",
        violations,
    )
    if violations:  # values of the wrong type: what they would mean cannot be judged
        raise InvalidArgument.for_fields("the request is invalid", unknown + violations)

    used_deprecated = legacy_plan is not None or legacy_immediate is not None
    plan_field = "plan_change.plan"
    if "plan_change" in body and body["plan_change"] is not None:
        plan, immediate = new_plan, bool(new_immediate)
        if plan is None:
            violations.append(("plan_change.plan", "required: the plan to change to"))
        if legacy_plan is not None and plan is not None and legacy_plan != plan:
            violations.append(
                ("plan", f"contradicts plan_change.plan ({plan!r}); send plan_change only")
            )
        if legacy_immediate is not None and legacy_immediate != immediate:
            violations.append(
                (
                    "immediate",
                    f"contradicts plan_change.immediate ({str(immediate).lower()}); send "
                    "plan_change only",
                )
            )
    else:
        plan, immediate = legacy_plan, bool(legacy_immediate)
        plan_field = "plan"
        if legacy_immediate is not None and plan is None:
            violations.append(("immediate", "needs a plan: send plan_change.plan"))
    if proration_date is not None and not immediate:
        violations.append(
            ("plan_change.proration_date", "goes with plan_change.immediate: true only")
        )
    if cancel and plan is not None:
        violations.append(
            (
                "phase_change.cancel_upcoming_changes",
                "cannot be combined with a plan change: send them as two requests",
            )
        )
    if not violations and plan is None and not cancel:
        violations.append(
            (
                "plan_change",
                "nothing requested: send plan_change.plan, or "
                "phase_change.cancel_upcoming_changes: true",
            )
        )
    if unknown or violations:
        raise InvalidArgument.for_fields("the request is invalid", unknown + violations)
    return ChangeRequest(
        plan=plan,
        immediate=immediate,
        cancel_upcoming_changes=bool(cancel),
        used_deprecated_fields=used_deprecated,
        plan_field=plan_field,
        proration_date=proration_date,
    )


def _object(
    body: Mapping[str, Any],
    name: str,
    allowed: frozenset[str],
    violations: list[tuple[str, str]],
    unknown: list[tuple[str, str]],
) -> Mapping[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        violations.append((name, "must be an object"))
        return {}
    for key in sorted(set(value) - allowed):
        unknown.append((f"{name}.{key}", "unknown field"))
    return value


def _plan(value: Any, field: str, violations: list[tuple[str, str]]) -> str | None:
    if value is None:
        return None
    if not is_id(value):
        violations.append(
            (field, "must be a plan id or name: 1 to 128 characters of [A-Za-z0-9_.:-]")
        )
        return None
    return value


def _timestamp(value: Any, field: str, violations: list[tuple[str, str]]) -> str | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        violations.append((field, "must be an RFC 3339 timestamp with its offset"))
        return None
    return str(value)


def _bool(value: Any, field: str, violations: list[tuple[str, str]]) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        violations.append((field, "must be a boolean"))
        return None
    return value
