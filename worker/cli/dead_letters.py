"""``billing-worker dead-letters``: messages no worker could take from a queue."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from worker.cli.base import REDIS_ENV, BillingGroup, fail
from worker.cli.tables import echo_list
from worker.local.stack_state import stack_settings

if TYPE_CHECKING:
    from adapters.messaging.dead_letters import DeadLetter, DeadLetters


def dead_letter_store() -> DeadLetters:
    from adapters.messaging.dead_letters import DeadLetters
    from adapters.messaging.redis_clients import redis_client

    settings = stack_settings()
    return DeadLetters(redis_client(settings), shiftable_clock=settings.shiftable_clock)


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


@dead_letters.command("drop", settings_env=REDIS_ENV)
@click.argument("letter_ids", nargs=-1, required=True)
def dead_letters_drop(letter_ids: tuple[str, ...]) -> None:
    """Forget dead letters."""
    store = dead_letter_store()
    for letter_id in letter_ids:
        if not store.drop(letter_id):
            fail(f"no dead letter {letter_id}")
        click.echo(f"dropped {letter_id}")
