"""The handler context of a command run in one transaction
(``CommandJournal.run_in_one_transaction``): every unit of work the handler opens is that
transaction, and the provider is out of reach (a provider call wants its intent persisted
first, in a transaction of its own)."""

from __future__ import annotations

from domain.ports.application import Clock, HandlerContext
from domain.ports.commands import CannotRunInOneTransaction
from domain.ports.provider import BillingPolicy, BillingProvider
from domain.ports.repositories import UnitOfWork


class InOneTransaction:
    """``context`` with its units of work replaced by ``uow``, the command's transaction."""

    def __init__(self, context: HandlerContext, uow: UnitOfWork) -> None:
        self._context = context
        self._uow = uow

    @property
    def clock(self) -> Clock:
        return self._context.clock

    @property
    def billing(self) -> BillingPolicy:
        return self._context.billing

    def unit_of_work(self) -> UnitOfWork:
        return self._uow

    def billing_provider(self) -> BillingProvider:
        raise CannotRunInOneTransaction("the handler calls the provider")
