"""The console's CSRF tokens and origin check (worker/api/console/csrf.py)."""

from __future__ import annotations

import pytest

from worker.api.console.csrf import (
    USED_RECORD_SLACK_SECONDS,
    CsrfTokens,
    Forbidden,
    UseUncheckable,
    check_origin,
    console_secret,
)

SECRET = b"a-server-secret-of-enough-bytes"


class Clock:
    def __init__(self, now: float) -> None:
        self.value = now

    def __call__(self) -> float:
        return self.value


def tokens(clock: Clock, secret: bytes = SECRET) -> CsrfTokens:
    return CsrfTokens(secret, lifetime_seconds=600, now=clock)


class UsedTokens:
    """What Redis's ``SET key 1 NX EX ttl`` keeps, in memory: each key with its time to live."""

    def __init__(self) -> None:
        self.kept: dict[str, int] = {}

    def first_use(self, key: str, ttl_seconds: int) -> bool:
        if key in self.kept:
            return False
        self.kept[key] = ttl_seconds
        return True


def unreachable(key: str, ttl_seconds: int) -> bool:
    raise ConnectionError("Redis does not answer")


def test_a_token_is_accepted_for_the_client_action_and_target_it_was_issued_for() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops", "replay-command", "cmd_a")

    tokens(clock).check("ops", "replay-command", "cmd_a", issued)
    tokens(clock).redeem("ops", "replay-command", "cmd_a", issued, UsedTokens().first_use)


def test_a_token_issued_to_another_client_is_refused() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops", "replay-command", "cmd_a")

    with pytest.raises(Forbidden, match="not valid for this client"):
        tokens(clock).check("intruder", "replay-command", "cmd_a", issued)


@pytest.mark.parametrize(
    ("action", "target"),
    [
        ("retry-command", "cmd_a"),  # another action on the same target
        ("replay-command", "cmd_b"),  # the same action on another target
        ("replay-commandcmd_a", ""),  # the same characters, cut elsewhere
    ],
)
def test_a_token_for_one_action_on_one_target_is_refused_for_another_action_or_target(
    action: str, target: str
) -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops", "replay-command", "cmd_a")

    with pytest.raises(Forbidden, match="this action and this target"):
        tokens(clock).redeem("ops", action, target, issued, UsedTokens().first_use)


def test_a_token_used_once_is_refused_the_second_time() -> None:
    clock = Clock(1_800_000_000)
    used = UsedTokens()
    issued = tokens(clock).issue("ops", "skip-change", "chg_1")
    tokens(clock).redeem("ops", "skip-change", "chg_1", issued, used.first_use)

    with pytest.raises(Forbidden, match="used already"):
        tokens(clock).redeem("ops", "skip-change", "chg_1", issued, used.first_use)


def test_each_confirmation_page_issues_a_token_of_its_own() -> None:
    clock = Clock(1_800_000_000)
    used = UsedTokens()
    first = tokens(clock).issue("ops", "skip-change", "chg_1")
    second = tokens(clock).issue("ops", "skip-change", "chg_1")
    tokens(clock).redeem("ops", "skip-change", "chg_1", first, used.first_use)

    tokens(clock).redeem("ops", "skip-change", "chg_1", second, used.first_use)
    assert first != second


def test_a_used_token_is_remembered_until_it_has_expired_for_every_api_process() -> None:
    clock = Clock(1_800_000_000)
    used = UsedTokens()
    issued = tokens(clock).issue("ops", "skip-change", "chg_1")
    clock.value += 100

    tokens(clock).redeem("ops", "skip-change", "chg_1", issued, used.first_use)

    [kept_for] = used.kept.values()
    assert kept_for == 500 + USED_RECORD_SLACK_SECONDS


def test_a_token_whose_use_cannot_be_recorded_is_refused_rather_than_taken_unchecked() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops", "skip-change", "chg_1")

    with pytest.raises(UseUncheckable, match="ConnectionError"):
        tokens(clock).redeem("ops", "skip-change", "chg_1", issued, unreachable)


def test_a_token_signed_under_another_secret_is_refused() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock, b"another-server-secret-entirely").issue("ops", "mark-offline", "ba_1")

    with pytest.raises(Forbidden, match="not valid"):
        tokens(clock).check("ops", "mark-offline", "ba_1", issued)


def test_a_token_is_refused_once_its_lifetime_is_over() -> None:
    clock = Clock(1_800_000_000)
    issued = tokens(clock).issue("ops", "mark-offline", "ba_1")
    clock.value += 599
    tokens(clock).check("ops", "mark-offline", "ba_1", issued)
    clock.value += 1

    with pytest.raises(Forbidden, match="expired"):
        tokens(clock).check("ops", "mark-offline", "ba_1", issued)


def test_a_token_whose_expiry_was_pushed_later_is_refused() -> None:
    clock = Clock(1_800_000_000)
    expiry, _, rest = tokens(clock).issue("ops", "mark-offline", "ba_1").partition(".")

    with pytest.raises(Forbidden, match="not valid"):
        tokens(clock).check("ops", "mark-offline", "ba_1", f"{int(expiry) + 86_400}.{rest}")


@pytest.mark.parametrize(
    "token",
    [
        None,
        "",
        "nodot",
        "abc.def",
        ".deadbeef",
        "1" * 13 + ".x",
        f"9999999999.{'0' * 64}",  # the old form: no nonce
        f"9999999999.{'0' * 32}.{'0' * 64}.",
    ],
)
def test_a_missing_or_malformed_token_is_refused(token: str | None) -> None:
    with pytest.raises(Forbidden):
        tokens(Clock(1_800_000_000)).check("ops", "mark-offline", "ba_1", token)


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
