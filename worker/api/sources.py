"""Who is calling: the address a request is counted under by the failed-authentication
throttle and the Stripe-signature throttle.

The source is what the socket says: the peer address. ``X-Forwarded-For`` is read only when
the peer is a trusted proxy (``BILLING_API_TRUSTED_PROXIES``, none by default), and then the
client is the rightmost address in it that is not itself a trusted proxy: each proxy appends
the address it saw, so the entries right of the client were written by proxies we trust, and
those left of it by whoever sent the request (anything at all). uvicorn's own reading of the
header is turned off where the API is launched (``worker/launch/command_lines.py``,
``billing-worker api``): with it on, uvicorn trusts the leftmost entry of a request from
127.0.0.1, whatever the caller wrote there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from starlette.types import ASGIApp, Receive, Scope, Send

from worker.settings import address_networks

Network = IPv4Network | IPv6Network


def _address(text: str) -> IPv4Address | IPv6Address | None:
    try:
        address = ip_address(text)
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:10.0.0.1, as a dual-stack socket reports 10.0.0.1
    return address


@dataclass(frozen=True)
class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` is believed (none: the header is never read)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, setting: str) -> TrustedProxies:
        """The proxies of ``BILLING_API_TRUSTED_PROXIES`` (addresses and CIDR networks,
        comma-separated)."""
        return cls(address_networks(setting))

    def trusts(self, address: str) -> bool:
        """Whether ``address`` is one of the trusted proxies."""
        parsed = _address(address)
        return parsed is not None and any(parsed in network for network in self.networks)

    def client(self, peer: str, forwarded_for: Iterable[str]) -> str:
        """The client of a request from ``peer`` carrying these ``X-Forwarded-For`` values (in
        the order they came): ``peer`` unless it is a trusted proxy; else the rightmost entry
        that is not a trusted proxy (the leftmost, when every entry is one; ``peer``, when
        there is none)."""
        if not self.trusts(peer):
            return peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        hops = [hop for hop in hops if hop]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return _canonical(hop)
        return _canonical(hops[0]) if hops else peer


def _canonical(hop: str) -> str:
    """One spelling per address (``::FFFF:10.0.0.1`` and ``10.0.0.1`` count as one source);
    an entry that is no address is kept as the proxy wrote it."""
    parsed = _address(hop)
    return hop if parsed is None else str(parsed)


class ClientFromTrustedProxy:
    """Puts the client a trusted proxy forwarded in the request's ``client`` (where every
    route, middleware and log line reads it), before anything else reads it. A request from
    a peer that is not a trusted proxy keeps its peer address, whatever headers it sends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(scope["app"].state, "api", None)
        peer = scope.get("client")
        if scope["type"] == "http" and state is not None and peer:
            proxies: TrustedProxies = state.trusted_proxies
            if proxies.networks:
                forwarded = _forwarded_for(scope["headers"])
                client = proxies.client(peer[0], forwarded) if forwarded else peer[0]
                if client != peer[0]:
                    # In place: the routing writes the matched route into this very scope,
                    # and the metrics middleware outside reads it there.
                    scope["client"] = (client, 0)
        await self.app(scope, receive, send)


def _forwarded_for(headers: Sequence[tuple[bytes, bytes]]) -> list[str]:
    return [value.decode("latin-1") for name, value in headers if name == b"x-forwarded-for"]
