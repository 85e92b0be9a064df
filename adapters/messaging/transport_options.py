"""Transport options of ours (in ``broker_transport_options``) that hand the guarded channel and
consumer (:mod:`adapters.messaging.broker`) their values: whether to mask personal data, whether
the clock may be shifted. :func:`adapters.messaging.config.celery_config` writes them; kombu
copies only the options it knows onto a channel, so these are read from the connection's."""

from __future__ import annotations

from typing import Any

MASK_PERSONAL_DATA = "mask_personal_data"
SHIFTABLE_CLOCK = "shiftable_clock"


def transport_option(options: dict[str, Any], name: str) -> bool:
    """One of our options. Masking is on unless the options say otherwise: a channel built
    without them hides."""
    return bool(options.get(name, name == MASK_PERSONAL_DATA))
