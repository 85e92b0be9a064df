"""Organizations and users for the tests, made by the handlers the admin commands run, on a
test's database (the services of ``worker.bootstrap``, with that database and clock)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from application.handlers import users
from application.handlers.billing import organizations
from domain.billing.organizations import NewOrganization, Organization
from domain.ports.application import Clock
from domain.ports.provider import BillingProvider
from domain.users import NewUser, User
from worker.bootstrap import Services, build_services
from worker.settings import get_settings


def services_on(
    sessions: sessionmaker[Session],
    clock: Clock | None = None,
    provider: BillingProvider | None = None,
) -> Services:
    """The application's services, on this database (and clock, and provider)."""
    return build_services(
        get_settings(), sessions=sessions, clock=clock or SystemClock(), provider=provider
    )


def create_organization(
    sessions: sessionmaker[Session], clock: Clock, *, name: str, disabled: bool = False
) -> Organization:
    return organizations.create_organization(
        NewOrganization(name=name, disabled=disabled), services_on(sessions, clock)
    )


def create_user(
    sessions: sessionmaker[Session], clock: Clock, *, email: str, disabled: bool = False
) -> User:
    return users.create_user(NewUser(email=email, disabled=disabled), services_on(sessions, clock))


def user_state(sessions: sessionmaker[Session], user_id: str) -> str | None:
    with SqlUnitOfWork(sessions) as uow:
        user = uow.users.get(user_id)
    return user.state.value if user is not None else None
