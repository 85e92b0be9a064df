"""The pure core of billing-worker: the messages, entities and rules of the business, its error
codes, and the ports the use cases reach the outside world through. It imports no Celery,
SQLAlchemy, Stripe, FastAPI or Redis, and nothing of ``application/``, ``tasks/`` or ``worker/``
(``tests/unit/test_layers.py``).

A map, one package per family:

* ``billing/``: organizations and their billing accounts, with the currencies and tax ids an
  account is registered with.
* ``subscriptions/``: plans, subscriptions and their billing periods, and the plan changes
  (immediate, at the period's end, previewed).
* ``events/``: what happened, told to the rest of the platform: each aggregate's events, their
  envelope, and the catalog that knows them by name.
* ``drift/``: where Stripe and our database disagree: the report and its rules.
* ``provider/``: the billing provider seen from here: the record of each call, Stripe's truth
  flowing in, the shared rate budget.
* ``operations/``: what an operator sees of commands: how one ended, how long the log keeps it,
  the console's read side.
* ``ports/``: the Protocols ``worker/`` implements: the repositories and the unit of work, the
  provider, the command log and publishing, the outbox and the webhooks, the application a
  handler runs with.

and the modules every family uses, or that stand alone: ``messages`` (the base of every command
and result), ``errors`` (the error codes, and the exceptions a command ends with), ``rules``
(the input rules every way in shares), ``redaction`` (which values are personal data, and how
each is masked), ``users``, ``permissions`` (what an API client may do) and ``webhooks``
(endpoints and their deliveries).
"""
