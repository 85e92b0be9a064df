"""``billing-worker dead-letters``: messages no worker could take from a queue."""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING

import click

from worker.cli.base import REDIS_ENV, BillingGroup, fail
from worker.cli.tables import echo_list
from worker.settings import get_settings

if TYPE_CHECKING:
    from worker.messaging.dead_letters import DeadLetter, DeadLetters


def dead_letter_store() -> DeadLetters:
    from worker.messaging.dead_letters import DeadLetters
    from worker.messaging.redis_clients import redis_client

    return DeadLetters(redis_client(get_settings()))


def worker_task_names() -> frozenset[str]:
    """The tasks the workers run: those the workers' task modules register (this code's, as
    a worker of the same release loads them), Celery's own left out. Read through this
    process's publishing app: the CLI never builds the workers' app."""
    from worker.bootstrap import bootstrap
    from worker.messaging.config import TASK_MODULES

    for module in TASK_MODULES:
        importlib.import_module(module)
    app = bootstrap().celery_app()
    return frozenset(name for name in app.tasks if not name.startswith("celery."))


def _letter(letter_id: str) -> DeadLetter:
    letter = dead_letter_store().get(letter_id)
    if letter is None:
        fail(f"no dead letter {letter_id}")
    return letter


@click.group("dead-letters", cls=BillingGroup)
def dead_letters() -> None:
    """Messages no worker could take from a queue: undecodable, malformed, oversized, of an
    unknown task, or reusing another command's id."""


@dead_letters.command("list", settings_env=REDIS_ENV)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def dead_letters_list(limit: int, as_json: bool) -> None:
    """The newest dead letters first."""
    store = dead_letter_store()
    letters = store.list(limit)
    if as_json:
        click.echo(json.dumps([letter.to_view() for letter in letters], indent=2))
        return
    kept, total = store.count(), store.total()
    echo_list(
        ("ID", "AT", "QUEUE", "SIZE", "TASK", "REASON"),
        [
            (
                letter.id,
                f"{letter.at:%Y-%m-%d %H:%M:%S}",
                letter.queue,
                f"{letter.size} B",
                letter.task or "-",
                letter.reason,
            )
            for letter in letters
        ],
        empty=f"no dead letters kept ({total} recorded in all)",
    )
    if letters:
        click.echo(f"{kept} dead letters kept ({total} recorded in all)")


@dead_letters.command("show", settings_env=REDIS_ENV)
@click.argument("letter_id")
def dead_letters_show(letter_id: str) -> None:
    """One dead letter with its raw bytes (as text, undecodable bytes escaped)."""
    click.echo(json.dumps(_letter(letter_id).to_view(with_raw=True), indent=2))


@dead_letters.command("replay", settings_env=REDIS_ENV)
@click.argument("letter_id")
def dead_letters_replay(letter_id: str) -> None:
    """Put the message back on its queue, if a worker can take it now (say, its task was
    unknown to the workers of the day); then drop the letter."""
    from worker.messaging.broker import Rejected, check_envelope
    from worker.messaging.redis_clients import redis_client

    letter = _letter(letter_id)
    if letter.truncated:
        fail(f"dead letter {letter_id} was kept truncated: cannot replay")
    try:
        check_envelope(letter.raw)
    except Rejected as why:
        fail(f"dead letter {letter_id} still cannot be taken: {why}")
    if letter.task not in worker_task_names():
        # Replayed, it would only come back as a new dead letter under a new id.
        fail(
            f"dead letter {letter_id} is of task {letter.task!r}, which no worker runs: "
            "not replayed (drop it, or replay it once a worker runs that task)"
        )
    redis_client(get_settings()).lpush(letter.queue, letter.raw)
    dead_letter_store().drop(letter_id)
    click.echo(f"replayed {letter_id} onto {letter.queue}")


@dead_letters.command("drop", settings_env=REDIS_ENV)
@click.argument("letter_ids", nargs=-1, required=True)
def dead_letters_drop(letter_ids: tuple[str, ...]) -> None:
    """Forget dead letters."""
    store = dead_letter_store()
    for letter_id in letter_ids:
        if not store.drop(letter_id):
            fail(f"no dead letter {letter_id}")
        click.echo(f"dropped {letter_id}")
