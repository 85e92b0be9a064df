"""Which API client may do what (spec section 5 leaves permissions "not shown").

A client holds scopes, one per operation, and may be limited to a set of organizations.
The decision is made from the request alone, before anything is loaded: a refusal never
tells whether the resource it names exists.

Commands published straight onto the queue are not subject to this: access to Redis is the
boundary, and whoever can publish there is trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from domain.errors import PermissionDenied, error_info


class Scope(StrEnum):
    USERS_ENABLE = "users:enable"
    BILLING_CREATE = "billing:create"
    BILLING_REGISTER = "billing:register"
    SUBSCRIPTIONS_CHANGE = "subscriptions:change"
    COMMANDS_READ = "commands:read"
    WEBHOOKS_MANAGE = "webhooks:manage"
    """Add, list, disable, enable webhook endpoints, rotate their secrets, list and replay
    their deliveries: configuration of every organization's events, so never limited to
    organizations."""
    OPERATIONS_READ = "operations:read"
    """The operator console's reads (``/v1beta1/operations``): every organization's accounts,
    subscriptions, commands and their stories."""
    OPERATIONS_WRITE = "operations:write"
    """The operator console's actions: retry a registration or a command now, mark an
    account offline, skip a plan change."""


OPERATOR_SCOPES = frozenset({Scope.OPERATIONS_READ, Scope.OPERATIONS_WRITE})
"""Scopes that span every organization: a grant limited to organizations never holds them."""


ALL_SCOPES = frozenset(Scope)

DEFAULT_SCOPES = frozenset({Scope.COMMANDS_READ})
"""A new client's scopes unless others are given: least privilege. It can read back the
commands it sent, and nothing more until an operator grants an operation."""


def parse_scopes(names: Iterable[str]) -> frozenset[Scope]:
    """Scopes from their names; ``*`` stands for every scope. An unknown name is a
    ``ValueError`` naming it and the known ones."""
    scopes: set[Scope] = set()
    for name in names:
        if name == "*":
            scopes |= ALL_SCOPES
            continue
        try:
            scopes.add(Scope(name))
        except ValueError:
            known = ", ".join(sorted(ALL_SCOPES))
            raise ValueError(f"unknown scope {name!r} (known: {known}, or *)") from None
    return frozenset(scopes)


@dataclass(frozen=True)
class Grant:
    """What one client may do: its scopes, in every organization (``org_ids`` is ``None``)
    or only in those listed."""

    scopes: frozenset[Scope] = DEFAULT_SCOPES
    org_ids: frozenset[str] | None = None

    def check(self, scope: Scope, org_id: str | None = None) -> None:
        """Raise ``PermissionDenied`` naming the missing permission, unless the grant holds
        ``scope`` (for ``org_id``, when the operation acts within an organization)."""
        if scope not in self.scopes:
            raise PermissionDenied(
                f"the client lacks the permission {scope.value!r}",
                details=[error_info("PERMISSION_DENIED", permission=scope.value)],
            )
        if scope in OPERATOR_SCOPES and self.org_ids is not None:
            raise PermissionDenied(
                f"the permission {scope.value!r} spans every organization: a client limited "
                "to organizations does not hold it",
                details=[error_info("PERMISSION_DENIED", permission=scope.value)],
            )
        if org_id is not None and self.org_ids is not None and org_id not in self.org_ids:
            raise PermissionDenied(
                f"the client lacks the permission {scope.value!r} on organization {org_id!r}",
                details=[
                    error_info("PERMISSION_DENIED", permission=scope.value, organization=org_id)
                ],
            )
