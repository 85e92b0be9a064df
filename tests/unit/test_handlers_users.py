"""The enable-user handler, on in-memory ports."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.handlers.users import enable_user
from domain.errors import NotFound
from domain.users import EnableUser, UserState
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_user


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication()


def test_enabling_a_disabled_user_enables_it_and_says_it_was_not_enabled(
    app: FakeApplication,
) -> None:
    app.db.seed(a_user("usr_1", enabled=False))
    app.clock.advance(timedelta(minutes=5))

    result = enable_user(EnableUser(command_id="c1", user_id="usr_1"), app)

    assert result.model_dump() == {"user_id": "usr_1", "was_already_enabled": False}
    stored = app.db.row("users", "usr_1")
    assert stored.state is UserState.ENABLED
    assert stored.updated_at == T0 + timedelta(minutes=5)


def test_enabling_an_enabled_user_succeeds_and_writes_nothing(app: FakeApplication) -> None:
    app.db.seed(a_user("usr_1", enabled=True))

    result = enable_user(EnableUser(command_id="c1", user_id="usr_1"), app)

    assert result.was_already_enabled is True
    assert app.db.commits == 0
    assert app.db.row("users", "usr_1").updated_at == T0


def test_an_unknown_user_is_not_found_naming_the_user(app: FakeApplication) -> None:
    with pytest.raises(NotFound) as raised:
        enable_user(EnableUser(command_id="c1", user_id="usr_missing"), app)

    assert raised.value.to_body()["details"][0]["resourceName"] == "usr_missing"
    assert app.db.rows("users") == []
