"""An account's whole story, as ``billing-worker accounts show`` and the console tell it: the
account, its commands, Stripe calls and events, and each of its subscriptions' stories (their
phases, plan changes, invoices at the provider, commands, calls and events). One use case for
both, so the command line and the browser never tell two stories."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from application.handlers.operations.actions import subscription_story
from application.requests.operator_actions import ShowSubscription
from domain.operations.console import (
    MAX_PAGE_SIZE,
    AccountStory,
    ConsoleQueries,
    SubscriptionStory,
)
from domain.ports.application import HandlerContext


class StoryContext(HandlerContext, Protocol):
    """What telling a story needs: the console's reads, and the provider for invoices."""

    def console(self) -> ConsoleQueries: ...


@dataclass(frozen=True)
class ShowAccount:
    """Tell the story of an account, named by its id or its organization's (a read: nothing
    changes, no event). ``invoices``: read its subscriptions' invoices from the provider."""

    org_or_account: str
    invoices: bool = True


def account_story(query: ShowAccount, ctx: StoryContext) -> AccountStory | None:
    """The account's story with its subscriptions' (newest first), or ``None`` when neither
    an account nor an organization with one has that id."""
    console = ctx.console()
    story = console.account_story(query.org_or_account)
    if story is None:
        return None
    account_id = str(story.billing_account["id"])
    listed = console.subscriptions(
        state=None,
        billing_account_id=account_id,
        plan_id=None,
        limit=MAX_PAGE_SIZE,
        after=None,
    )
    stories: list[SubscriptionStory] = []
    for item in reversed(listed.items):
        read = console.subscription_story(item.id)
        if read is None:  # deleted between the list and the read
            continue
        stories.append(subscription_story(ShowSubscription(read), ctx) if query.invoices else read)
    stories.sort(key=lambda told: str(told.subscription.get("created_at", "")), reverse=True)
    return story.model_copy(update={"subscriptions": stories})
