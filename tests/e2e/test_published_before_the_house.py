"""Messages a publisher put on the queues before the use cases moved to ``application/`` and
the domain into packages (issue 31) are processed after it: the move renamed modules, never a
task, a queue or a field.

``tests/support/published_before_the_house.json`` holds the envelopes exactly as Redis stored
them when 65c1547 published them: with our own publisher, and with a plain Celery client as
``examples/publish_command.py`` does. Only the data changes per run: the user, the
organization and the command ids (new ones, so the test can run again on one stack).
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from adapters.clock import SystemClock
from adapters.db.models import BillingAccountRow
from tests.support.raw_messages import push
from tests.support.records import create_organization, create_user, user_state
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

RECORDED = json.loads(
    (Path(__file__).parents[1] / "support" / "published_before_the_house.json").read_text()
)


def with_data(raw: str, values: dict[str, str]) -> bytes:
    """The recorded envelope with its placeholders (ids) replaced, in its headers and in its
    base64 body alike; nothing else of it changes."""
    envelope: dict[str, Any] = json.loads(raw)
    body = base64.b64decode(envelope["body"]).decode()
    text = json.dumps(envelope)
    for placeholder, value in values.items():
        body = body.replace(placeholder, value)
        text = text.replace(placeholder, value)
    replaced = json.loads(text)
    replaced["body"] = base64.b64encode(body.encode()).decode()
    return json.dumps(replaced).encode()


def recorded(task: str, how: str) -> dict[str, Any]:
    return next(
        message
        for message in RECORDED["messages"]
        if f'"task": "{task}"' in message["raw"] and message["how"].startswith(how)
    )


def new_ids(message: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A new command id for the recorded message, and the replacements that give it one: the
    command id in its kwargs, and its task id (the same one when our publisher sent it)."""
    envelope = json.loads(message["raw"])
    _, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
    command_id = str(uuid.uuid4())
    replacements = {kwargs["command_id"]: command_id}
    replacements.setdefault(envelope["headers"]["id"], str(uuid.uuid4()))
    return command_id, replacements


@pytest.mark.parametrize("how", ["our publisher", "a plain Celery client"])
def test_a_user_enabled_by_a_message_published_before_the_move_is_enabled_after_it(
    stack: Stack, how: str
) -> None:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    message = recorded("users.enable", how)
    command_id, replacements = new_ids(message)

    push(
        stack.redis_url,
        message["queue"],
        with_data(message["raw"], {"USER_ID": str(user.id), **replacements}),
    )

    assert stack.finished(command_id, timeout=30).status.value == "succeeded"
    assert user_state(stack.sessions, str(user.id)) == "enabled"


def test_an_offline_account_created_by_a_message_published_before_the_move_is_active_after_it(
    stack: Stack,
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"old-{uuid.uuid4().hex[:8]}")
    message = recorded("billing.create_account", "our publisher")
    command_id, replacements = new_ids(message)

    push(
        stack.redis_url,
        message["queue"],
        with_data(message["raw"], {"ORG_ID": str(org.id), **replacements}),
    )

    assert stack.finished(command_id, timeout=30).status.value == "succeeded"
    with stack.sessions() as session:
        accounts = session.scalars(
            select(BillingAccountRow).where(BillingAccountRow.org_id == str(org.id))
        ).all()
    assert [(account.name, account.state) for account in accounts] == [("Old Client Ltd", "active")]
