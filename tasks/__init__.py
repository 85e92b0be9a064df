"""Celery only: the thin tasks (their names a public contract), the runner that runs a command as a
task, and the glue to the app; the work is in ``application/``."""
