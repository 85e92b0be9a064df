"""What every ``billing-worker`` command shares: its global options (accepted before and after
the command's name), the environment variables its help names, the services it runs
handlers with, and the one place where a failure becomes one line on stderr.

Exit statuses, one convention for every command:

* 0: done.
* 1: the command line was read, and the request is refused: a value that breaks a rule of
  the data (a taken name, an invalid email, an unknown id, a URL that is not public), a
  state that forbids it (a dead letter that cannot be replayed), the operator said no at a
  prompt, or it failed unexpectedly.
* 2: the command line itself is wrong, whatever the data: an unknown command or option, a
  missing or extra argument, a value not of its option's form (a number, a duration such as
  ``31x``, one of a fixed list such as a scope, an event type or a state), options that
  exclude each other, a confirmation (``--yes``) missing where nobody can be asked. Raised
  as click's usage errors (:func:`usage_error`), always with the command's ``--help`` named.
* 3: a dependency is unreachable (the database, Redis or the billing provider): the same
  command may work later.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from pydantic import ValidationError

from domain.errors import CommandError, TransientError, violations_of
from worker.local.stack_state import read_stack, stack_settings
from worker.settings import get_settings, masked_url

if TYPE_CHECKING:
    from worker.bootstrap import Services

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3

CLI_MAX_BUDGET_WAIT_SECONDS = 120.0
"""A command line simply waits its turn in the shared Stripe rate budget (a task would rather
go back to its queue)."""

DATA_DIR = "BILLING_DATA_DIR"
DATABASE_ENV = (
    DATA_DIR,
    "BILLING_DATABASE_URL",
    "BILLING_DATABASE_LOCK_TIMEOUT_SECONDS",
    "BILLING_DATABASE_NETWORK_TIMEOUT_SECONDS",
)
REDIS_ENV = (DATA_DIR, "BILLING_REDIS_URL", "BILLING_REDIS_SENTINELS")
STRIPE_ENV = (
    DATA_DIR,
    "BILLING_STRIPE_API_KEY",
    "BILLING_STRIPE_API_BASE",
    "BILLING_STRIPE_TIMEOUT_SECONDS",
    "BILLING_STRIPE_BUDGET_ENABLED",
    "BILLING_STRIPE_RATE_PER_SECOND",
    "BILLING_STRIPE_BURST",
    "BILLING_REDIS_URL",
    "BILLING_REDIS_SENTINELS",
)


def _use_data_dir(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    # Given before or after the command's name, the last one read wins; every setting is read
    # after the options are parsed, so they all see it.
    if value is not None:
        os.environ[DATA_DIR] = str(value)
        get_settings.cache_clear()


def data_dir_option() -> click.Option:
    return click.Option(
        ["--data-dir"],
        type=click.Path(path_type=Path),
        envvar=DATA_DIR,
        show_envvar=True,
        expose_value=False,
        is_eager=True,
        callback=_use_data_dir,
        help="Data directory: the SQLite database, logs and the stack file of `up` "
        "[default: ./.billing-worker, or the nearest in a parent directory that holds a "
        "local stack].",
    )


def _environment_epilog(variables: Sequence[str]) -> str:
    names = list(dict.fromkeys(variables))
    heading = "Environment (every setting is a BILLING_* variable: docs/reference/settings.md):"
    return f"\b\n{heading}\n  " + "\n  ".join(names)


class BillingCommand(click.Command):
    """A command that takes the global options after its name too, and whose help lists the
    ``BILLING_*`` variables it reads (``settings_env``)."""

    def __init__(
        self, *args: Any, settings_env: Sequence[str] = (DATA_DIR,), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(data_dir_option())
        if self.epilog is None:
            self.epilog = _environment_epilog(settings_env)


class BillingGroup(click.Group):
    """A group of billing-worker commands (and the root): its commands are
    :class:`BillingCommand`, its subgroups ``BillingGroup``."""

    command_class = BillingCommand
    group_class = type

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(data_dir_option())
        if self.epilog is None:
            self.epilog = _environment_epilog((DATA_DIR,))


class RootGroup(BillingGroup):
    """The ``billing-worker`` group: every failure of every command ends here, as one line on
    stderr and an exit status (see the module's docstring), never a traceback."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as error:
            # A group named without a command: its help, as click shows it.
            if not standalone_mode:
                raise
            error.show()
            sys.exit(error.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(EXIT_REFUSED)
        except Exception as error:  # the one place where every failure is reported
            message, status = explain(error)
            click.echo(f"Error: {message}", err=True)
            if not standalone_mode:
                raise
            sys.exit(status)
        if standalone_mode:
            sys.exit(status if isinstance(status, int) else 0)
        return status


def _one_line(text: str) -> str:
    return " ".join(text.split())


def explain(error: BaseException) -> tuple[str, int]:
    """One line saying what went wrong, and the exit status."""
    if isinstance(error, click.UsageError):
        hint = f" (see `{error.ctx.command_path} --help`)" if error.ctx is not None else ""
        return _one_line(error.format_message()) + hint, EXIT_USAGE
    if isinstance(error, click.ClickException):
        return _one_line(error.format_message()), error.exit_code
    if isinstance(error, CommandError):
        return _one_line(_with_violations(error)), EXIT_REFUSED
    if isinstance(error, ValidationError):
        return _one_line(validation_message(error)), EXIT_REFUSED
    if isinstance(error, TransientError):
        return _one_line(f"{error.message} (try again)"), EXIT_UNAVAILABLE
    unreachable = _unreachable(error)
    if unreachable is not None:
        return _one_line(unreachable), EXIT_UNAVAILABLE
    return _one_line(f"unexpected {type(error).__name__}: {error}"), EXIT_REFUSED


def validation_message(error: Any) -> str:
    """``field: why; field: why`` for a pydantic ``ValidationError``."""
    return "; ".join(
        f"{field}: {why}" for field, why in violations_of(error.errors(include_url=False))
    )


def _with_violations(error: Any) -> str:
    reasons = [
        f"{violation['field']} {violation['description']}"
        for detail in error.details
        for violation in detail.get("fieldViolations", [])
    ]
    if not reasons or all(reason in error.message for reason in reasons):
        return str(error.message)
    return f"{error.message}: {'; '.join(reasons)}"


def _no_stack_hint(*, needs_running: bool = False) -> str:
    """Said when the data directory holds no running local stack: where the CLI looked, or
    that the stack found there is not running."""
    settings = get_settings()
    stack = read_stack(settings.data_dir)
    if needs_running and stack and not stack.get("stopped"):
        return (
            f"; is the local stack of {settings.data_dir.resolve()} running? "
            "`billing-worker up` starts it"
        )
    if stack or os.environ.get(DATA_DIR):
        return ""
    return (
        f"; no local stack in {Path.cwd()} or its parents: run this where `billing-worker up` "
        "runs (or below), or give --data-dir / BILLING_DATA_DIR"
    )


def _unreachable(error: BaseException) -> str | None:
    """The database or Redis could not be reached (or answered with an error): one line
    naming the URL tried (password masked)."""
    settings = get_settings()
    if type(error).__module__.startswith("sqlalchemy"):
        from sqlalchemy.exc import DBAPIError

        cause = error.orig if isinstance(error, DBAPIError) else error
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        url = masked_url(settings.resolved_database_url())
        hint = "" if settings.database_url else _no_stack_hint()
        if "no such table" in first or ("relation" in first and "does not exist" in first):
            return (
                f"the database is not migrated ({first}) at {url}: run `billing-worker migrate`"
                + hint
            )
        return f"the database is unreachable or refused the request at {url}: {first}{hint}"
    if type(error).__module__.startswith("redis"):
        from adapters.messaging.redis_clients import describe_redis, uses_sentinel

        where = describe_redis(stack_settings())
        explicit = settings.redis_url or uses_sentinel(stack_settings())
        hint = "" if explicit else _no_stack_hint(needs_running=True)
        return f"Redis is unreachable at {where}: {error}{hint}"
    return None


def fail(message: str) -> NoReturn:
    """Refuse the request (exit status 1) with ``message``."""
    raise click.ClickException(message)


def usage_error(message: str) -> NoReturn:
    """Refuse the command line itself (exit status 2) with ``message``: a value not of its
    option's form, options that exclude each other."""
    raise click.UsageError(message, ctx=click.get_current_context(silent=True))


def emit(as_json: bool, data: Any, text: str) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def services() -> Services:
    """The services admin commands run handlers with: the workers' own adapters, from the
    same settings (the emulator of a running ``up`` when no Stripe key is set), whose provider
    calls wait their turn in the rate budget."""
    from worker.bootstrap import build_services

    return build_services(stack_settings(), max_budget_wait_seconds=CLI_MAX_BUDGET_WAIT_SECONDS)


as_json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")

OPERATOR_ENV = "BILLING_OPERATOR"


def default_operator() -> str:
    """Who runs the command line, as the audit trail names them: ``$BILLING_OPERATOR``, else
    the OS user (``cli`` when neither is known)."""
    import getpass

    named = os.environ.get(OPERATOR_ENV, "").strip()
    if named:
        return named
    try:
        return getpass.getuser() or "cli"
    except (KeyError, OSError):  # no name for the process's uid (a bare container)
        return "cli"


def _checked_operator(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
    name = " ".join((value or default_operator()).split())
    if not name or len(name) > 128 or not name.isprintable():
        raise click.BadParameter("an operator's name: 1 to 128 printable characters")
    return name


operator_option = click.option(
    "--operator",
    default=None,
    callback=_checked_operator,
    help=f"Who takes the action, as the audit trail keeps it [default: ${OPERATOR_ENV}, "
    "else the OS user].",
)
