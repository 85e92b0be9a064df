from __future__ import annotations

from domain.errors import NotFound
from domain.ports import HandlerContext
from domain.users import EnableUser, UserEnabled


def enable_user(command: EnableUser, svc: HandlerContext) -> UserEnabled:
    """Enable the user; enabling an enabled user succeeds and changes nothing."""
    with svc.unit_of_work() as uow:
        user = uow.users.get(command.user_id, for_update=True)
        if user is None:
            raise NotFound.resource("user", command.user_id)
        changed = user.enable(svc.clock.now())
        if changed:
            uow.users.save(user)
            uow.commit()
    return UserEnabled(user_id=command.user_id, was_already_enabled=not changed)
