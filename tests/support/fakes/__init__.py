"""In-memory fakes of the ports (``domain/ports/application.py``, ``domain/ports/repositories.py``,
``domain/ports/provider.py``, ``domain/ports/commands.py``, ``domain/ports/events.py``), for fast
tests of the real handlers and of the real task runner; one module an idea:

* ``clock``: :class:`FakeClock`, which moves only when told to (and ``T0``, where it starts);
* ``database``: :class:`FakeDatabase` and :class:`FakeUnitOfWork` (``adapters/db/uow.py``): its
  transactions and the schema's uniqueness rules; ``repositories``: its tables
  (``adapters/db/repositories.py``);
* ``events``: the outbox and webhook tables, the Redis stream, the webhook sender and the
  relay's lock (``adapters/db/events.py``, ``adapters/outbound/``);
* ``provider``: :class:`FakeBillingProvider`, an in-memory Stripe as
  ``adapters/provider/stripe_adapter.py`` sees it; ``provider_requests``: how it answers a
  request (idempotency keys, scripted failures, refusals);
* ``journal``: :class:`FakeCommandJournal`, the command log (``adapters/db/command_log.py``);
* ``messaging``: the publisher and the dead letters;
* ``application``: :class:`FakeApplication`, every port at once, as the handlers and the
  runner are given it;
* ``data``: test data (entities to seed, a subscription seeded on both sides).

Each fake keeps the contract of its real adapter, as far as the handlers can tell; the
contract tests (``tests/integration/*_contract.py``) run the same checks against both.
Nothing here imports ``worker``: the fakes stand where the adapters stand. Import each fake
from its module.
"""
