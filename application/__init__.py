"""The use cases: every business operation (a queued command, an operator's action, a beat sweep)
as one handler behind the unit of work, called alike by a Celery task (``tasks/``), the API, the
CLI and ``up``. It imports the domain only: no Celery, kombu, SQLAlchemy, Stripe, FastAPI or
Redis, nothing of ``tasks/`` or ``worker/`` (``tests/unit/test_layers.py``).

A map:

* ``handlers/``: one module per family of operations, each handler ``handler(message, ctx)``:
  load, decide (in the domain), persist, call the provider, record.
* ``requests/``: the messages only the handlers take: what beat's sweeps and an operator ask
  (the commands of the queue are the domain's, a public contract).
* ``command_runner``: the one runner of a command's delivery: parse, journal, run its handler,
  classify what went wrong, and decide (``command_outcomes``) whether it ends, waits or retries;
  the Celery task only carries that out.
* ``provider_calls``: every provider call a command makes, recorded around the call.
* ``one_transaction``: the handler context of a command run in one transaction.
* ``log_context``: what every log line of a running command carries.
* ``retry``: the backoff of transient failures: exponential, capped, with full jitter.
"""
