"""The runnable system: the processes (the API, the CLI, the launchers, the local stack, the
Celery app) and the one composition root, ``bootstrap.py``, which hands each adapter
(``adapters/``) its values."""
