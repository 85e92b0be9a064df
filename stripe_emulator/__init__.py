"""A Stripe API emulator: a real HTTP server the ``stripe`` SDK talks to as it talks to Stripe.

Serves customers (with tax IDs and search), products, prices (in Stripe's currencies),
subscriptions (with search) and subscription items, the invoices and invoice items
subscriptions make, events and webhook endpoints, with Stripe's wire protocol (form encoding,
bracket notation, ``expand[]``, list and search objects), errors, idempotency rules and rate
limit, plus an admin API under ``/_emulator`` to drive a clock, make a customer's payments fail
or succeed, set dunning rules, inject faults into requests and into webhook deliveries, and
read the request and delivery logs.

Billing follows Stripe's: a subscription is invoiced on creation and at every renewal (at the
item's price at that instant), changes are prorated to the second (``proration_behavior``,
``proration_date``, previews through ``POST /v1/invoices/create_preview``), a new interval
restarts the cycle and invoices at once, invoices are finalized and charged at once, and a
declined payment follows ``payment_behavior`` and the dunning rules as emulator time moves
(see ``billing.py``, ``changes.py``, ``invoicing.py``, ``payments.py``). There are no payment
methods: charges succeed unless the admin API says a customer's fail.

Events follow Stripe's too: every write and every time-driven change (a renewal, a trial
ending, a retry, a cancel taking effect) records ``evt_`` objects with a snapshot of the object
and, on updates, ``previous_attributes`` (``events.py``; what is recorded when:
``recorder.py``), readable at ``GET /v1/events``. Each event is POSTed in the background to
the webhook endpoints that want it (``POST /v1/webhook_endpoints``), signed as Stripe signs
(``Stripe-Signature``, checked by ``stripe.Webhook.construct_event``) with a **wall-clock**
timestamp whatever the emulator clock says, and retried with backoff until a 2xx
(``webhooks.py``); the admin API duplicates, reorders, delays, drops or pauses deliveries
(``webhook_faults.py``).

Run it: ``python -m stripe_emulator --host 127.0.0.1 --port 12111`` (or ``stripe-emulator``;
``--api-key``, ``--rate-limit``, ``--state-file``, ``--event-log-size``), or :func:`serve` /
:func:`create_app` from code, and point the SDK at it:
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
from stripe_emulator.client_webhooks import (
    DeliveryAttempt,
    RetrySchedule,
    WebhookFault,
    WebhookStatus,
)
from stripe_emulator.config import API_VERSION, DEFAULT_API_KEY, EmulatorConfig
from stripe_emulator.server import serve

__all__ = [
    "API_VERSION",
    "DEFAULT_API_KEY",
    "DeliveryAttempt",
    "Dunning",
    "EmulatorAdmin",
    "EmulatorAdminError",
    "EmulatorApp",
    "EmulatorConfig",
    "Fault",
    "LoggedRequest",
    "RetrySchedule",
    "WebhookFault",
    "WebhookStatus",
    "create_app",
    "parse_duration",
    "serve",
]
