"""Operator actions on plans (``billing-worker plans``, ``up``'s demo data)."""

from __future__ import annotations

from application.requests.operator_requests import CreatePlan, ListPlans
from domain.errors import AlreadyExists, UniquenessViolation, resource_info
from domain.ports.application import HandlerContext
from domain.rules import checked_id, new_id
from domain.subscriptions.plans import Plan


def create_plan(request: CreatePlan, svc: HandlerContext) -> Plan:
    """Create a plan with its product and price at the provider.

    The plan is saved first, then registered with the idempotency key of its id: running the
    same command again after a failure resumes the plan (same name and terms) instead of
    making a second product.
    """
    spec, plan_id = request.spec, request.plan_id
    if plan_id is not None:
        checked_id(plan_id, "id")
    with svc.unit_of_work() as uow:
        plan = uow.plans.by_name(spec.name)
        if plan is not None and (plan.is_registered or not plan.matches(spec)):
            raise AlreadyExists(
                f"a plan named {spec.name!r} exists already ({plan.id})",
                details=[resource_info("plan", plan.id)],
            )
        if plan is None:
            plan = Plan.new(plan_id or new_id("plan"), spec, svc.clock.now())
            uow.plans.add(plan)
            try:
                uow.commit()
            except UniquenessViolation:
                raise AlreadyExists(f"a plan {plan.id!r} or {spec.name!r} exists already") from None
    provider = svc.billing_provider()
    price = provider.create_plan_price(plan.provider_plan(), idempotency_key=plan.registration_key)
    with svc.unit_of_work() as uow:
        plan.registered(provider.name, price, svc.clock.now())
        uow.plans.save(plan)
        uow.commit()
    return plan


def list_plans(request: ListPlans, svc: HandlerContext) -> list[Plan]:
    """Every plan, by name."""
    with svc.unit_of_work() as uow:
        return uow.plans.list()
