"""Headless Chromium for the console's browser tests and screenshots: Debian's ``chromium``
package driven by Playwright, never a browser Playwright downloads. Skipped where it is
missing, a failure in CI (``CI=true``; ``.ci/run`` installs it)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, sync_playwright

CHROMIUM = Path(os.environ.get("BILLING_CHROMIUM", "/usr/bin/chromium"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def chromium_path() -> Path:
    if not CHROMIUM.exists():
        if IN_CI:
            pytest.fail(f"{CHROMIUM} is required in CI (Debian package chromium; .ci/run)")
        pytest.skip(f"{CHROMIUM} not found (apt-get install --no-install-recommends chromium)")
    return CHROMIUM


@contextmanager
def chromium(executable: Path) -> Iterator[Browser]:
    """A headless Chromium of ``executable``, closed on the way out."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Watched:
    """A page, and what went wrong on it: HTTP errors and console errors."""

    page: Page
    problems: list[str] = field(default_factory=list)
    expected_statuses: set[int] = field(default_factory=set)

    def _response(self, response: Response) -> None:
        if response.status >= 400 and response.status not in self.expected_statuses:
            self.problems.append(f"HTTP {response.status} for {response.url}")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        # Chromium logs every answer ≥ 400 as an error too: an expected one is no problem
        # (an unexpected one is already in the problems, from its response).
        answered = re.match(
            r"Failed to load resource: the server responded with a status of (\d+)", message.text
        )
        if answered and int(answered.group(1)) in self.expected_statuses:
            return
        self.problems.append(f"console error: {message.text}")


@contextmanager
def watched_page(
    browser: Browser, base_url: str, credentials: tuple[str, str] | None
) -> Iterator[Watched]:
    """A page of a fresh context (the client's Basic credentials, if any), watched for HTTP
    errors (≥ 400), console errors and uncaught page errors."""
    context = browser.new_context(
        base_url=base_url,
        http_credentials=(
            None
            if credentials is None
            else {"username": credentials[0], "password": credentials[1]}
        ),
        viewport={"width": 1280, "height": 900},
    )
    page = context.new_page()
    watched = Watched(page)
    page.on("response", watched._response)
    page.on("console", watched._console)
    page.on("pageerror", lambda error: watched.problems.append(f"page error: {error}"))
    try:
        yield watched
    finally:
        context.close()
