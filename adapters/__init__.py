"""The adapters: each implements the domain's ports on one technology, and is handed its
values by the composition root (``worker/bootstrap.py``); none imports ``worker``, ``tasks``,
the Stripe emulator, FastAPI or Click.

- ``db/``: SQLAlchemy: the models, the repositories, the unit of work, the command log and
  its runs, the migrations (Alembic), the API clients' store;
- ``provider/``: Stripe, one module per family of operations (the only modules of the
  product that import ``stripe``), and the shared rate budget;
- ``messaging/``: Redis and Celery's configuration: the queues, the guarded broker
  transport, the result store, dead letters, masking, the publisher;
- ``outbound/``: events out: the Redis stream and the webhook sender;
- ``observability/``: metrics, the Celery signals that record them, log lines;
- ``contracts/``: the JSON Schemas of the messages and the AsyncAPI document;
- ``clock.py``: the system clock, and the local stack's shiftable one.
"""
