"""``python -m worker.cli``: the ``billing-worker`` command."""

from worker.cli import main

main()
