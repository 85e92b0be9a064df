"""The operator console's reads (``domain/operations/console.py``): the story of a billing account
and of a subscription, from the command log, the provider-call record and the outbox.

A command belongs to an account's story when its payload names the account or its
organization, or when it emitted one of the account's events or made one of its provider
calls. Payloads are read through each database's JSON operators; the newest
:data:`STORY_LIMIT` of each kind are kept, shown oldest first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session, sessionmaker

from adapters.db import listing, search
from adapters.db.audit import entry_of
from adapters.db.listing import call_view, command_view, event_view
from adapters.db.models import (
    AuditEntryRow,
    BillingAccountRow,
    CommandRow,
    EventRow,
    ProviderCallRow,
)
from adapters.db.payload_fields import PayloadField
from adapters.db.repositories import (
    SqlBillingAccountRepository,
    SqlOrganizationRepository,
    SqlPlanRepository,
    SqlScheduledChangeRepository,
    SqlSubscriptionRepository,
)
from domain.operations.audit import AuditEntry
from domain.operations.console import (
    AccountStory,
    BillingAccountPage,
    CommandPage,
    CommandStory,
    CommandView,
    EventView,
    OrganizationPage,
    PhaseView,
    ProviderCallView,
    SearchHit,
    SubscriptionPage,
    SubscriptionStory,
    UserPage,
)
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription

STORY_LIMIT = 200
"""The most commands, provider calls and events a story shows of each (the newest)."""


def _payload_names(names: Iterable[tuple[str, str]]) -> ColumnElement[bool]:
    """Commands whose payload has one of ``(field, value)``."""
    return or_(*(PayloadField(CommandRow.payload, field) == value for field, value in names))


class SqlConsole:
    """The :class:`domain.operations.console.ConsoleQueries` on the database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    # --- stories -----------------------------------------------------------------------------

    def account_story(self, org_or_account: str) -> AccountStory | None:
        with self._sessions() as session:
            accounts = SqlBillingAccountRepository(session)
            account = accounts.get(org_or_account)
            if account is None:
                newest = _newest_account_id(session, org_or_account)
                account = accounts.current_for_organization(org_or_account) or (
                    accounts.get(newest) if newest else None
                )
            if account is None:
                return None
            organization = SqlOrganizationRepository(session).get(account.org_id)
            subjects = [f"billing_account:{account.id}"]
            if account.provider_id:
                subjects.append(f"provider_customer:{account.provider_id}")
            events = _events(session, [f"billing_account:{account.id}"])
            calls = _calls(session, subjects, ())
            command_ids = {e.command_id for e in events} | {c.command_id for c in calls}
            commands = _commands(
                session,
                _payload_names([("org_id", account.org_id), ("billing_account_id", account.id)]),
                command_ids,
            )
            ids = [command.id for command in commands]
            calls = _calls(session, subjects, ids)
            events = _events(session, [f"billing_account:{account.id}"], ids)
            return AccountStory(
                billing_account=account.to_view(),
                organization=organization.to_view() if organization else None,
                registered=account.is_registered,
                provider_customer_id=account.provider_id,
                registration_key=account.registration_key,
                registration_started_at=account.registration_started_at,
                commands=commands,
                provider_calls=calls,
                events=events,
                audit=_audit(session, account.id),
            )

    def subscription_story(self, subscription_id: str) -> SubscriptionStory | None:
        with self._sessions() as session:
            subscription = SqlSubscriptionRepository(session).get(subscription_id)
            if subscription is None:
                return None
            changes = SqlScheduledChangeRepository(session).for_subscription(subscription_id)
            names = [("subscription_id", subscription_id)]
            names += [("change_id", change.id) for change in changes]
            subjects = [
                f"subscription:{subscription_id}",
                f"provider_subscription:{subscription.provider_id}",
            ]
            commands = _commands(
                session,
                _payload_names(names),
                {change.command_id for change in changes if change.command_id},
            )
            ids = [command.id for command in commands]
            plan = SqlPlanRepository(session).get(subscription.plan_id)
            return SubscriptionStory(
                subscription={
                    **subscription.to_view(),
                    "plan": plan.to_view() if plan else None,
                    "current_phase": subscription.current_phase().model_dump(mode="json"),
                },
                phases=phases_of(subscription, changes),
                changes=[change.to_view() for change in changes],
                invoices=None,
                commands=commands,
                provider_calls=_calls(session, subjects, ids),
                events=_events(session, [f"subscription:{subscription_id}"], ids),
            )

    def command_story(self, command_id: str) -> CommandStory | None:
        with self._sessions() as session:
            return search.command_story(session, command_id)

    # --- search ------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        with self._sessions() as session:
            return search.search(session, query, limit)

    # --- lists -------------------------------------------------------------------------------

    def organizations(
        self, *, state: str | None, limit: int, after: str | None
    ) -> OrganizationPage:
        with self._sessions() as session:
            return listing.organizations(session, state=state, limit=limit, after=after)

    def users(self, *, state: str | None, limit: int, after: str | None) -> UserPage:
        with self._sessions() as session:
            return listing.users(session, state=state, limit=limit, after=after)

    def billing_accounts(
        self, *, state: str | None, org_id: str | None, limit: int, after: str | None
    ) -> BillingAccountPage:
        with self._sessions() as session:
            return listing.billing_accounts(
                session, state=state, org_id=org_id, limit=limit, after=after
            )

    def subscriptions(
        self,
        *,
        state: str | None,
        billing_account_id: str | None,
        plan_id: str | None,
        limit: int,
        after: str | None,
    ) -> SubscriptionPage:
        with self._sessions() as session:
            return listing.subscriptions(
                session,
                state=state,
                billing_account_id=billing_account_id,
                plan_id=plan_id,
                limit=limit,
                after=after,
            )

    def commands(
        self,
        *,
        statuses: Sequence[str],
        command_type: str | None,
        limit: int,
        after: str | None,
        updated_since: datetime | None = None,
    ) -> CommandPage:
        with self._sessions() as session:
            return listing.commands(
                session,
                statuses=statuses,
                command_type=command_type,
                limit=limit,
                after=after,
                updated_since=updated_since,
            )

    def recent_commands(
        self, *, status: str, updated_since: datetime, shown: int
    ) -> tuple[int, list[CommandView]]:
        with self._sessions() as session:
            return listing.recent_commands(
                session, status=status, updated_since=updated_since, shown=shown
            )


def _newest_account_id(session: Session, org_id: str) -> str | None:
    return session.scalars(
        select(BillingAccountRow.id)
        .where(BillingAccountRow.org_id == org_id)
        .order_by(BillingAccountRow.created_at.desc())
        .limit(1)
    ).first()


def _commands(
    session: Session, named: ColumnElement[bool], ids: Collection[str | None]
) -> list[CommandView]:
    known = [command_id for command_id in ids if command_id]
    condition = or_(named, CommandRow.id.in_(known)) if known else named
    rows = session.scalars(
        select(CommandRow)
        .where(condition)
        .order_by(CommandRow.created_at.desc(), CommandRow.id.desc())
        .limit(STORY_LIMIT)
    ).all()
    return [command_view(row) for row in reversed(rows)]


def _calls(
    session: Session, subjects: Sequence[str], command_ids: Sequence[str]
) -> list[ProviderCallView]:
    condition: ColumnElement[bool] = ProviderCallRow.subject.in_(subjects)
    if command_ids:
        condition = or_(condition, ProviderCallRow.command_id.in_(command_ids))
    rows = session.scalars(
        select(ProviderCallRow)
        .where(condition)
        .order_by(ProviderCallRow.started_at.desc(), ProviderCallRow.id.desc())
        .limit(STORY_LIMIT)
    ).all()
    return [call_view(row) for row in reversed(rows)]


def _events(
    session: Session, subjects: Sequence[str], command_ids: Sequence[str] = ()
) -> list[EventView]:
    # A command's own events (command.failed) are under its subject: the index finds them.
    keys = [*subjects, *(f"command:{command_id}" for command_id in command_ids)]
    rows = session.scalars(
        select(EventRow)
        .where(EventRow.subject_key.in_(keys))
        .order_by(EventRow.sequence.desc())
        .limit(STORY_LIMIT)
    ).all()
    return [event_view(row) for row in reversed(rows)]


def phases_of(subscription: Subscription, changes: Sequence[ScheduledChange]) -> list[PhaseView]:
    """The plans the subscription was, is and will be on, by when: its start, each applied
    change, the current period, and each pending change."""
    applied = sorted(
        (change for change in changes if change.state is ChangeState.APPLIED),
        key=lambda change: change.effective_at,
    )
    phases: list[PhaseView] = []
    if applied:
        first = applied[0]
        phases.append(
            PhaseView(
                effective_at=subscription.created_at, plan_id=first.from_plan_id, source="started"
            )
        )
    phases += [
        PhaseView(effective_at=change.effective_at, plan_id=change.target_plan_id, source="applied")
        for change in applied
    ]
    current = subscription.current_phase()
    since = current.effective_at
    if applied and applied[-1].target_plan_id == current.plan_id:
        # Changed within the period (an immediate change): the plan began then, not at the
        # period's start.
        since = max(since, applied[-1].effective_at)
    phases.append(PhaseView(effective_at=since, plan_id=current.plan_id, source="current"))
    phases += [
        PhaseView(
            effective_at=change.effective_at,
            plan_id=change.target_plan_id,
            source=change.state.value,
        )
        for change in changes
        if change.state.is_pending
    ]
    return sorted(phases, key=lambda phase: phase.effective_at)


def _audit(session: Session, billing_account_id: str) -> list[AuditEntry]:
    """The newest :data:`STORY_LIMIT` audit entries of the account, oldest first."""
    rows = session.scalars(
        select(AuditEntryRow)
        .where(AuditEntryRow.billing_account_id == billing_account_id)
        .order_by(AuditEntryRow.at.desc(), AuditEntryRow.id.desc())
        .limit(STORY_LIMIT)
    )
    return [entry_of(row) for row in reversed(list(rows))]
