from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from domain.users import EnableUser, User, UserState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def user(state: UserState) -> User:
    return User(
        id="usr_1", email="a@example.com", name="A", state=state, created_at=T0, updated_at=T0
    )


def test_enabling_a_disabled_user_enables_it_and_touches_updated_at() -> None:
    subject = user(UserState.DISABLED)
    assert subject.enable(T0 + timedelta(hours=1)) is True
    assert subject.state is UserState.ENABLED
    assert subject.updated_at == T0 + timedelta(hours=1)


def test_enabling_an_enabled_user_changes_nothing() -> None:
    subject = user(UserState.ENABLED)
    assert subject.enable(T0 + timedelta(hours=1)) is False
    assert subject.updated_at == T0


def test_the_enable_command_is_frozen_and_versioned() -> None:
    command = EnableUser(command_id="c1", user_id="usr_1")
    assert command.version == 1
    assert command.model_dump() == {"version": 1, "command_id": "c1", "user_id": "usr_1"}
    with pytest.raises(ValidationError):
        command.user_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "fields",
    [
        {"command_id": "c1"},
        {"command_id": "c1", "user_id": ""},
        {"command_id": "c1", "user_id": "has space"},
        {"command_id": "c1", "user_id": "a/b"},
        {"command_id": "c1", "user_id": "x" * 129},
        {"command_id": "c1", "user_id": "u", "extra": 1},
        {"command_id": "c1", "user_id": "u", "version": 2},
        {"command_id": "", "user_id": "u"},
    ],
)
def test_the_enable_command_rejects_malformed_messages(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        EnableUser.model_validate(fields)
