"""``python -m worker.cli``: the ``billing-worker`` command, under its own name."""

from worker.cli import main

main(prog_name="billing-worker")
