"""Who is calling (``worker/api/sources.py``): the peer address, unless the peer is a trusted
proxy; then the rightmost forwarded address that is not a trusted proxy."""

from __future__ import annotations

import pytest

from worker.api.sources import TrustedProxies
from worker.settings import Settings

PROXIES = TrustedProxies.of("172.30.80.0/24, 10.0.0.7, fd00::/64")


def test_without_trusted_proxies_the_header_is_never_read() -> None:
    assert TrustedProxies().client("127.0.0.1", ["203.0.113.7"]) == "127.0.0.1"


def test_a_peer_that_is_not_a_trusted_proxy_is_the_source_whatever_it_forwards() -> None:
    assert PROXIES.client("198.51.100.4", ["203.0.113.7"]) == "198.51.100.4"


def test_behind_a_trusted_proxy_the_rightmost_untrusted_address_is_the_client() -> None:
    # The caller wrote 203.0.113.7 and 192.0.2.1; the proxies 10.0.0.7 and 172.30.80.2 each
    # appended the address they saw.
    forwarded = ["203.0.113.7, 192.0.2.1", "198.51.100.4,10.0.0.7"]
    assert PROXIES.client("172.30.80.2", forwarded) == "198.51.100.4"


def test_an_address_is_one_source_however_it_is_spelled() -> None:
    assert PROXIES.client("::ffff:172.30.80.2", ["::FFFF:198.51.100.4"]) == "198.51.100.4"
    assert PROXIES.client("fd00::2", ["2001:DB8::0:1"]) == "2001:db8::1"


def test_a_trusted_proxy_forwarding_nothing_is_the_source_itself() -> None:
    assert PROXIES.client("172.30.80.2", ["", " , "]) == "172.30.80.2"
    assert PROXIES.client("172.30.80.2", ["10.0.0.7"]) == "10.0.0.7"


def test_the_setting_refuses_an_entry_that_is_no_address_or_network() -> None:
    with pytest.raises(ValueError, match="'proxy' is not an address or a CIDR network"):
        Settings(api_trusted_proxies="10.0.0.0/8,proxy")
    assert Settings().api_trusted_proxies == ""
