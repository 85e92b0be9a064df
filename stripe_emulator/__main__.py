"""``python -m stripe_emulator --host 127.0.0.1 --port 12111``."""

from __future__ import annotations

import argparse
from pathlib import Path

from stripe_emulator.config import DEFAULT_API_KEY, DEFAULT_RATE_LIMIT, EmulatorConfig
from stripe_emulator.server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m stripe_emulator",
        description="A Stripe API emulator for tests and local runs (foreground; Ctrl-C stops).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=12111, help="0 picks a free port")
    parser.add_argument("--api-key", default=DEFAULT_API_KEY, help="the secret key to accept")
    parser.add_argument(
        "--extra-api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="another accepted key of the same account (repeatable); idempotency keys are "
        "scoped per API key",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=DEFAULT_RATE_LIMIT,
        help="read and write operations per second each before 429s (Stripe test mode: 25); "
        "0 turns it off",
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        default=None,
        help="load state from this JSON file at start (if present), save it on shutdown",
    )
    parser.add_argument(
        "--event-log-size",
        type=int,
        default=100_000,
        help="events kept (oldest dropped first)",
    )
    args = parser.parse_args(argv)
    if args.rate_limit < 0:
        parser.error("--rate-limit must be >= 0")
    if args.event_log_size < 1:
        parser.error("--event-log-size must be >= 1")
    config = EmulatorConfig(
        api_key=args.api_key,
        rate_limit_per_second=args.rate_limit,
        state_file=args.state_file,
        extra_api_keys=frozenset(args.extra_api_key),
        event_log_size=args.event_log_size,
    )
    serve(config, args.host, args.port)


if __name__ == "__main__":
    main()
