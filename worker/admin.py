"""Operator actions behind the CLI's admin commands (and the demo data of ``up``)."""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from domain.organizations import Organization, OrganizationState, validate_avatar
from domain.ports import Clock
from domain.users import UserState
from worker.db.models import OrganizationRow, UserRow


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def create_organization(
    sessions: sessionmaker[Session],
    clock: Clock,
    *,
    name: str,
    title: str = "",
    org_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    avatar: str | None = None,
    disabled: bool = False,
) -> Organization:
    now = clock.now()
    organization = Organization(
        id=org_id or new_id("org"),
        name=name,
        title=title or name,
        state=OrganizationState.DISABLED if disabled else OrganizationState.ENABLED,
        created_at=now,
        updated_at=now,
        metadata=metadata or {},
        avatar=validate_avatar(avatar) if avatar else None,
    )
    with sessions.begin() as session:
        session.add(
            OrganizationRow(
                id=organization.id,
                name=organization.name,
                title=organization.title,
                metadata_=organization.metadata,
                state=organization.state.value,
                avatar=organization.avatar,
                created_at=now,
                updated_at=now,
            )
        )
    return organization


def create_user(
    sessions: sessionmaker[Session],
    clock: Clock,
    *,
    email: str,
    name: str = "",
    user_id: str | None = None,
    disabled: bool = False,
) -> dict[str, Any]:
    now = clock.now()
    row = UserRow(
        id=user_id or new_id("usr"),
        email=email,
        name=name,
        state=(UserState.DISABLED if disabled else UserState.ENABLED).value,
        created_at=now,
        updated_at=now,
    )
    with sessions.begin() as session:
        session.add(row)
    return {"id": row.id, "email": row.email, "name": row.name, "state": row.state}


def user_state(sessions: sessionmaker[Session], user_id: str) -> str | None:
    with sessions() as session:
        row = session.get(UserRow, user_id)
        return row.state if row else None
