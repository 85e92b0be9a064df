"""A row read ``for_update`` is the reader's until it commits, on SQLite as on PostgreSQL: a
second load-decide-save of the same row waits, then decides on what the first wrote."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from tests.support.records import create_user


def test_two_enables_of_one_user_at_once_change_it_once(
    backend: str, make_database: Callable[[str], str]
) -> None:
    sessions = session_factory(make_database(f"locks_{uuid.uuid4().hex[:8]}"))
    clock = SystemClock()
    user_id = str(create_user(sessions, clock, email=f"{uuid.uuid4().hex}@x.io", disabled=True).id)
    first_holds_the_row = threading.Event()
    changed: dict[str, bool] = {}

    def enable(name: str, hold: float) -> None:
        with SqlUnitOfWork(sessions) as uow:
            user = uow.users.get(user_id, for_update=True)
            assert user is not None
            if hold:
                first_holds_the_row.set()
                time.sleep(hold)
            changed[name] = user.enable(clock.now())
            if changed[name]:
                uow.users.save(user)
                uow.commit()

    first = threading.Thread(target=enable, args=("first", 0.5))
    first.start()
    assert first_holds_the_row.wait(10)
    enable("second", 0)
    first.join()

    assert changed == {"first": True, "second": False}
