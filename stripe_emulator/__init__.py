"""A Stripe API emulator: a real HTTP server the ``stripe`` SDK talks to as it talks to Stripe.

Serves customers (with tax IDs and search), products, prices, subscriptions and subscription
items with Stripe's wire protocol (form encoding, bracket notation, ``expand[]``, list and
search objects), errors, idempotency rules and rate limit, plus an admin API under
``/_emulator`` to drive a clock, inject faults and read a request log.

Run it: ``python -m stripe_emulator --host 127.0.0.1 --port 12111`` (or ``stripe-emulator``;
``--api-key``, ``--rate-limit``, ``--state-file``), or :func:`serve` / :func:`create_app` from
code, and point the SDK at it:
``stripe.StripeClient(key, base_addresses={"api": "http://127.0.0.1:12111"})``.

A distribution of its own (``billing-stripe-emulator``: ``pip install -e ./stripe_emulator``)
that imports nothing from the rest of the project; billing-worker's wheel and image leave it out.
"""

from stripe_emulator.app import EmulatorApp, create_app
from stripe_emulator.client import (
    Dunning,
    EmulatorAdmin,
    EmulatorAdminError,
    Fault,
    LoggedRequest,
    parse_duration,
)
from stripe_emulator.config import API_VERSION, DEFAULT_API_KEY, EmulatorConfig
from stripe_emulator.server import serve

__all__ = [
    "API_VERSION",
    "DEFAULT_API_KEY",
    "Dunning",
    "EmulatorAdmin",
    "EmulatorAdminError",
    "EmulatorApp",
    "EmulatorConfig",
    "Fault",
    "LoggedRequest",
    "create_app",
    "parse_duration",
    "serve",
]
