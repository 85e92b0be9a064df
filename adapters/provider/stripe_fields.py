"""Which of our inputs a Stripe parameter comes from: a refusal names the field really at
fault, in the command's own names (Stripe's ``param`` → ``account.email``, ``plan``, …)."""

from __future__ import annotations

import re

# Stripe's parameter names → the fields of the create command's billing details
# (``account`` of :class:`domain.billing.account_commands.CreateBillingAccount`), where every
# value of a customer comes from.
_FIELD_OF_PARAM = {
    "name": "account.name",
    "email": "account.email",
    "phone": "account.phone",
    "metadata": "account.metadata",
    "address": "account.address",
    "tax_id_data": "account.tax_data",
}
_TAX_PARAM = re.compile(r"^tax_id_data\[(\d+)\]\[(type|value)\]$")
_NESTED_PARAM = re.compile(r"^(\w+)\[(\w+)\]")


def field_for_param(param: str | None) -> str:
    """The command field for a Stripe ``param`` of a customer call (``tax_id_data[0][value]`` →
    ``account.tax_data[0].id``); ``account`` when Stripe named none or one we do not send.

    Names are the command's, never an HTTP request's: the API renames them for its answer."""
    if not param:
        return "account"
    tax = _TAX_PARAM.match(param)
    if tax:
        return f"account.tax_data[{tax.group(1)}].{'id' if tax.group(2) == 'value' else 'type'}"
    nested = _NESTED_PARAM.match(param)
    if nested and nested.group(1) == "address":
        return f"account.address.{nested.group(2)}"
    root = nested.group(1) if nested else param
    return _FIELD_OF_PARAM.get(root, "account")


def plan_field(param: str | None) -> str:
    """Every parameter of a subscription's update (or read) comes from the plan asked for (the
    ``plan`` of :class:`domain.subscriptions.change_commands.ChangeSubscriptionPlan`)."""
    return "plan"


# Stripe's parameters of a subscription creation → the inputs of ``subscriptions create``
# (``application/handlers/subscriptions/subscribe.py::create_subscription``, its terms named as
# the CLI shows them); ``subscription`` when Stripe named none or one we do not take from an
# input.
_SUBSCRIPTION_FIELD_OF_PARAM = {
    "customer": "billing_account",
    "items": "plan",
    "currency": "plan",
    "collection_method": "collection",
    "days_until_due": "days_until_due",
    "trial_period_days": "trial_days",
}
# Stripe's parameters of a price creation → the fields of
# :class:`domain.subscriptions.plans.PlanSpec`; ``plan`` when Stripe named none or one we do not
# take from a field.
_PRICE_FIELD_OF_PARAM = {
    "currency": "currency",
    "unit_amount": "amount",
    "recurring": "interval",
    "nickname": "title",
    "product_data": "title",
}


def _param_root(param: str) -> str:
    nested = _NESTED_PARAM.match(param)
    return nested.group(1) if nested else param


def subscription_field(param: str | None) -> str:
    """The input of a subscription creation a Stripe ``param`` comes from (``customer`` →
    ``billing_account``, ``items[0][price]`` → ``plan``, ``trial_period_days`` →
    ``trial_days``)."""
    if not param:
        return "subscription"
    return _SUBSCRIPTION_FIELD_OF_PARAM.get(_param_root(param), "subscription")


def price_field(param: str | None) -> str:
    """The field of a plan a Stripe ``param`` of its price comes from (``unit_amount`` →
    ``amount``, ``recurring[interval]`` → ``interval``)."""
    if not param:
        return "plan"
    return _PRICE_FIELD_OF_PARAM.get(_param_root(param), "plan")


def list_field(param: str | None) -> str:
    """A list's parameters come from no command's input: a refusal names Stripe's own
    (``starting_after``: the cursor a walk resumed from), or ``list``."""
    return param or "list"
