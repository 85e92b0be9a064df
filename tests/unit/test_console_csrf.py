"""The console's CSRF tokens and origin check (worker/api/console/csrf.py)."""

from __future__ import annotations

import pytest

from worker.api.console.csrf import CsrfTokens, Forbidden, check_origin, console_secret

SECRET = b"a-server-secret-of-enough-bytes"


class Clock:
    def __init__(self, now: float) -> None:
        self.value = now

    def __call__(self) -> float:
        return self.value


def tokens(clock: Clock, secret: bytes = SECRET) -> CsrfTokens:
    return CsrfTokens(secret, lifetime_seconds=600, now=clock)


def test_a_token_is_accepted_for_the_client_it_was_issued_to() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops")

    tokens(clock).check("ops", issued)


def test_a_token_issued_to_another_client_is_refused() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops")

    with pytest.raises(Forbidden, match="not valid for this client"):
        tokens(clock).check("intruder", issued)


def test_a_token_signed_under_another_secret_is_refused() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock, b"another-server-secret-entirely").issue("ops")

    with pytest.raises(Forbidden, match="not valid"):
        tokens(clock).check("ops", issued)


def test_a_token_is_refused_once_its_lifetime_is_over() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops")
    clock.value += 599
    tokens(clock).check("ops", issued)
    clock.value += 1

    with pytest.raises(Forbidden, match="expired"):
        tokens(clock).check("ops", issued)


def test_a_token_whose_expiry_was_pushed_later_is_refused() -> None:
    clock = Clock(1_800_000_000)
    expiry, _, signature = tokens(clock).issue("ops").partition(".")

    with pytest.raises(Forbidden, match="not valid"):
        tokens(clock).check("ops", f"{int(expiry) + 86_400}.{signature}")


@pytest.mark.parametrize("token", [None, "", "nodot", "abc.def", ".deadbeef", "1" * 13 + ".x"])
def test_a_missing_or_malformed_token_is_refused(token: str | None) -> None:
    with pytest.raises(Forbidden):
        tokens(Clock(1_800_000_000)).check("ops", token)


def test_a_secret_too_short_to_sign_with_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        CsrfTokens(b"short")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"origin": "http://127.0.0.1:8080"},
        {"origin": "https://127.0.0.1:8080"},
        {"referer": "http://127.0.0.1:8080/console/failures"},
    ],
)
def test_a_request_from_the_consoles_own_origin_or_naming_none_passes(
    headers: dict[str, str],
) -> None:
    check_origin(headers, "127.0.0.1:8080")


def test_the_default_port_of_the_origins_scheme_matches_a_host_without_a_port() -> None:
    check_origin({"origin": "https://billing.example"}, "billing.example")
    check_origin({"origin": "https://billing.example:443"}, "billing.example")


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "http://127.0.0.1:9999"},
        {"origin": "null"},
        {"referer": "http://evil.example/form.html"},
        {"origin": "http://evil.example", "referer": "http://127.0.0.1:8080/console"},
        {"origin": "http://[bad"},
    ],
)
def test_a_request_from_another_origin_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(Forbidden):
        check_origin(headers, "127.0.0.1:8080")


def test_the_configured_secret_wins_else_the_kept_one_is_shared() -> None:
    kept: dict[str, bytes] = {}

    def read_or_make(key: str, candidate: bytes) -> bytes:
        return kept.setdefault(key, candidate)

    assert console_secret("configured-secret", read_or_make) == b"configured-secret"
    first = console_secret(None, read_or_make)
    assert console_secret(None, read_or_make) == first
    assert len(first) >= 32
