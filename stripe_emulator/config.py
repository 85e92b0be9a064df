"""Emulator settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_API_KEY = "sk_test_emulator"
# Stripe's documented rate limit for test mode (sandboxes): 25 read and 25 write operations
# per second.
DEFAULT_RATE_LIMIT = 25.0
# The API version the pinned stripe SDK (16.x) sends; echoed when a request names none.
API_VERSION = "2026-10-28.endive"


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    """How an emulator instance behaves.

    ``api_key`` is the secret key clients must send (``Authorization: Bearer ...``);
    ``extra_api_keys`` are further accepted keys of the same account (they share its data but,
    as on Stripe, not its idempotency keys). ``rate_limit_per_second`` of 0 turns the limiter
    off. With ``state_file`` set, data and clock are loaded from it at start (if it exists) and
    saved to it on shutdown. ``event_log_size`` bounds the events kept (oldest dropped).
    """

    api_key: str = DEFAULT_API_KEY
    rate_limit_per_second: float = DEFAULT_RATE_LIMIT
    state_file: Path | None = None
    extra_api_keys: frozenset[str] = field(default_factory=frozenset)
    request_log_size: int = 50_000
    event_log_size: int = 100_000
