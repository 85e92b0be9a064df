"""Operator actions on organizations (``billing-worker orgs``, ``up``'s demo data)."""

from __future__ import annotations

from domain.billing.organizations import NewOrganization, Organization
from domain.errors import AlreadyExists, UniquenessViolation, resource_info
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.rules import new_id


def create_organization(spec: NewOrganization, svc: HandlerContext) -> Organization:
    """Create the organization; a taken name or id is an ``AlreadyExists`` naming the
    organization in the way."""
    organization = Organization.new(spec.id or new_id("org"), spec, svc.clock.now())
    with svc.unit_of_work() as uow:
        _refuse_a_clash(uow, organization)
        uow.organizations.add(organization)
        try:
            uow.commit()
        except UniquenessViolation:
            # A concurrent creation got there between the check and the commit.
            _refuse_a_clash(uow, organization)
            raise
    return organization


def _refuse_a_clash(uow: UnitOfWork, organization: Organization) -> None:
    holder = uow.organizations.by_name(organization.name)
    if holder is not None:
        raise UniquenessViolation.taken("organization name", organization.name, holder.id)
    if uow.organizations.get(organization.id) is not None:
        raise AlreadyExists(
            f"organization {organization.id!r} exists already",
            details=[resource_info("organization", organization.id)],
        )
