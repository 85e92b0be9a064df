"""User handlers: enable (a command from the queue) and create (an operator action)."""

from __future__ import annotations

from domain.errors import AlreadyExists, UniquenessViolation, found, resource_info
from domain.events.users import UserEnabledEvent
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.rules import new_id
from domain.users import EnableUser, NewUser, User, UserEnabled


def enable_user(command: EnableUser, svc: HandlerContext) -> UserEnabled:
    """Enable the user; enabling an enabled user succeeds and changes nothing."""
    with svc.unit_of_work() as uow:
        user = found(uow.users.get(command.user_id, for_update=True), "user", command.user_id)
        now = svc.clock.now()
        changed = user.enable(now)
        if changed:
            uow.users.save(user)
            uow.events.add(UserEnabledEvent.of(user, command_id=command.command_id, now=now))
            uow.commit()
    return UserEnabled(user_id=command.user_id, was_already_enabled=not changed)


def create_user(spec: NewUser, svc: HandlerContext) -> User:
    """Create the user; a taken email or id is an ``AlreadyExists`` naming the user in the
    way."""
    user = User.new(spec.id or new_id("usr"), spec, svc.clock.now())
    with svc.unit_of_work() as uow:
        _refuse_a_clash(uow, user)
        uow.users.add(user)
        try:
            uow.commit()
        except UniquenessViolation:
            # A concurrent creation got there between the check and the commit.
            _refuse_a_clash(uow, user)
            raise
    return user


def _refuse_a_clash(uow: UnitOfWork, user: User) -> None:
    holder = uow.users.by_email(user.email)
    if holder is not None:
        raise UniquenessViolation.taken("user email", user.email, holder.id)
    if uow.users.get(user.id) is not None:
        raise AlreadyExists(
            f"user {user.id!r} exists already", details=[resource_info("user", user.id)]
        )
