"""Repositories: translate between rows and domain entities."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from domain.users import User, UserState
from worker.db.models import UserRow


class SqlUserRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, user_id: str, *, for_update: bool = False) -> User | None:
        query = select(UserRow).where(UserRow.id == user_id)
        if for_update:
            query = query.with_for_update()
        row = self._session.scalars(query).one_or_none()
        if row is None:
            return None
        return User(
            id=row.id,
            email=row.email,
            name=row.name,
            state=UserState(row.state),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def save(self, user: User) -> None:
        row = self._session.get(UserRow, user.id)
        if row is None:
            row = UserRow(id=user.id, created_at=user.created_at)
            self._session.add(row)
        row.email = user.email
        row.name = user.name
        row.state = user.state.value
        row.updated_at = user.updated_at
