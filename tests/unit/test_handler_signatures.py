"""Every handler is called the same way, ``handler(message, ctx)``: one frozen message (a
queued command, an operator's action, a sweep) first, the context second. Read from the
handlers themselves, so that a new one in another order fails here."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import application.handlers
from domain.messages import Message
from domain.ports.application import (
    Application,
    CommandLogContext,
    HandlerContext,
    IntakeContext,
    OperatorContext,
    OutboxContext,
    PublishingContext,
)

CONTEXTS = (
    HandlerContext,
    PublishingContext,
    IntakeContext,
    CommandLogContext,
    OperatorContext,
    OutboxContext,
    Application,
)
"""What a handler may be given: the handler context, a part of the application made on it
(the publisher, the command log's intake, the command log's side, the outbox's side), or the
whole application."""


def public_functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    prefix = f"{application.handlers.__name__}."
    for info in pkgutil.walk_packages(application.handlers.__path__, prefix):
        module = importlib.import_module(info.name)
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("_") and function.__module__ == module.__name__:
                yield f"{info.name.removeprefix(prefix)}.{name}", function


def takes_a_context(function: Callable[..., Any]) -> bool:
    hints = typing.get_type_hints(function)
    hints.pop("return", None)
    return any(hint in CONTEXTS for hint in hints.values())


HANDLERS = {name: function for name, function in public_functions() if takes_a_context(function)}


def is_frozen_message(kind: object) -> bool:
    if isinstance(kind, type) and issubclass(kind, Message):
        return kind.model_config.get("frozen") is True
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return kind.__dataclass_params__.frozen  # type: ignore[attr-defined,no-any-return]
    return False


def test_the_handlers_are_found() -> None:
    # A guard for the test below: an import that moved must not leave it nothing to check.
    found = {"billing.accounts.create_billing_account", "operations.sweeps.publish_due_changes"}
    assert found <= set(HANDLERS)
    given_a_part = {
        "operations.actions.retry_command",
        "events.relay.relay_events",
        "events.webhook_deliveries.deliver",
        "provider.stripe_events.take_in_stripe_event",
    }
    assert given_a_part <= set(HANDLERS)
    assert len(HANDLERS) > 40


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_every_handler_takes_its_message_first_and_its_context_second(name: str) -> None:
    handler = HANDLERS[name]
    parameters = list(inspect.signature(handler).parameters.values())
    hints = typing.get_type_hints(handler)

    assert [parameter.kind for parameter in parameters] == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD
    ] * 2, f"{name} takes {inspect.signature(handler)}, not (message, ctx)"
    message, context = parameters
    assert is_frozen_message(hints[message.name]), f"{name}'s first argument is no message"
    assert hints[context.name] in CONTEXTS, f"{name}'s second argument is not the context"
    assert all(parameter.default is inspect.Parameter.empty for parameter in parameters)
