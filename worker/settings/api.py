"""The HTTP API: where it listens, how long it waits, authentication and its throttles, each
client's share (``worker/api``).
"""

from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from worker.settings.section import Section


class ApiSettings(Section):
    """The HTTP API: where it listens, how long it waits, authentication and its throttles, each
    client's share (``worker/api``).
    """

    title: ClassVar[str] = "HTTP API"

    api_host: str = Field(
        default="127.0.0.1",
        description="Address the HTTP API listens on (0.0.0.0 in a container).",
    )
    api_port: int = Field(default=8080, description="Port of the HTTP API.")
    api_trusted_proxies: str = Field(
        default="",
        description="Proxies in front of the API whose `X-Forwarded-For` is believed: "
        "addresses and CIDR networks, comma-separated (`172.30.80.0/24,10.0.0.7`; empty, the "
        "default: none). The failed-authentication and Stripe-signature throttles count each "
        "request under its source: the peer address, or, when the peer is one of these, the "
        "rightmost address of its `X-Forwarded-For` that is not one of these (never the "
        "leftmost, which the caller writes). List only proxies that overwrite or append to the "
        "header, and that callers cannot bypass.",
    )
    api_processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="API processes serving the one port (uvicorn's workers, restarted if one "
        "dies). Their metrics add up in one `/metrics` answer (multiprocess mode) and they "
        "share the failed-authentication throttle through Redis.",
    )
    http_wait_timeout_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long the API waits for a command's outcome before answering 202.",
    )
    api_read_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long a client has to send a whole request, head and body, from its "
        "first byte (or from connecting); slower clients get a 408 and are disconnected.",
    )
    console_csrf_secret: SecretStr | None = Field(
        default=None,
        description="The secret the console's forms are signed with against cross-site request "
        "forgery (at least 16 characters); if unset, one is made and kept in Redis, shared by "
        "every API process on that Redis.",
        min_length=16,
    )
    auth_cache_seconds: float = Field(
        default=60.0,
        ge=0,
        description="How long a verified client secret is trusted. A client that uses it past "
        "half this time has it verified again in the background, so an active client never "
        "waits for a hash, and a disabled client or a rotated secret is seen within this time.",
    )
    auth_max_failures_per_source_and_client: int = Field(
        default=10,
        ge=1,
        description="Failed authentications of one client id from one source address within "
        "the window before that source's requests for that client id are refused (429) "
        "without a hash. Never counted per client id alone: a client's right secret from "
        "another source is served, whoever is guessing it. (Was "
        "`BILLING_AUTH_MAX_FAILURES_PER_CLIENT`.)",
    )
    auth_max_failures_per_source: int = Field(
        default=30,
        ge=1,
        description="Failed authentications from one source address within the window before "
        "its requests are refused (429) without a hash.",
    )
    auth_failure_window_seconds: float = Field(
        default=60.0, gt=0, description="The sliding window of failed authentications."
    )
    auth_throttled_hold_seconds: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="How long a refusal for too many failed authentications, or of a command "
        "naming an organization that does not exist, is held before it is sent: a flooding "
        "client then waits instead of sending again at once.",
    )
    auth_max_held_refusals: int = Field(
        default=1024,
        ge=0,
        description="Refusals an API process holds at once; beyond it they are sent at once.",
    )
    auth_max_concurrent_hashes: int = Field(
        # One core is left to the event loop: each argon2id verification takes a core and
        # 64 MiB of memory traffic for about 0.1 s.
        default_factory=lambda: max(1, (os.cpu_count() or 2) - 1),
        ge=1,
        description="Slow (argon2id) verifications an API process runs at once "
        "(default: the machine's cores less one, at least one).",
    )
    client_commands_per_second: float = Field(
        default=1.0,
        ge=0,
        description="New commands one API client may send per second for one organization, "
        "sustained (previews, changes, creations alike; 0: no limit per organization). Beyond "
        "it and its burst a request is refused (429, Retry-After) before anything is recorded, "
        "so that a flood aimed at one organization cannot take the workers and Stripe's budget "
        "from every organization's period end: interactive commands go first on both, so keep "
        "a client's rate times its commands' Stripe calls a small part of "
        "BILLING_STRIPE_RATE_PER_SECOND. A command of no organization (enabling a user) is "
        "counted by BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND only.",
    )
    client_command_burst: int = Field(
        default=20,
        ge=0,
        description="New commands one API client may send at once for one organization, on "
        "top of its rate.",
    )
    client_total_commands_per_second: float = Field(
        default=5.0,
        ge=0,
        description="New commands one API client may send per second in all, sustained, "
        "whatever the organizations (and commands of no organization, such as enabling a "
        "user); 0: no ceiling. The share per organization cannot be multiplied past it by "
        "naming many organizations. 5 a second is 2 % of a worker core (4 ms a command) and "
        "a fortieth of the 200 commands a second the capacity page sizes a deployment for.",
    )
    client_total_command_burst: int = Field(
        default=100,
        ge=0,
        description="New commands one API client may send at once in all, on top of its "
        "ceiling's rate: a batch of 100 user enables is accepted at once (about 0.4 s of one "
        "worker process).",
    )

    @field_validator("api_trusted_proxies")
    @classmethod
    def _api_trusted_proxies(cls, value: str) -> str:
        try:
            address_networks(value)
        except ValueError as invalid:
            raise ValueError(f"{invalid} (BILLING_API_TRUSTED_PROXIES)") from None
        return value


def address_networks(setting: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """The networks of a comma-separated list of addresses and CIDR networks
    (``10.0.0.2, 172.30.80.0/24, fd00::/64``); ``ValueError`` naming an entry that is
    neither."""
    networks: list[IPv4Network | IPv6Network] = []
    for entry in filter(None, (part.strip() for part in setting.split(","))):
        try:
            networks.append(ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an address or a CIDR network") from None
    return tuple(networks)
