"""The console's screenshots in the docs (``docs/images/console/*.png``), taken again:
``python3 -m worker.dev screenshots``.

A throwaway ``billing-worker up`` (its own data directory, free ports, the demo data), one
account whose registration Stripe refuses until its retries are spent (an emulator fault,
with a short retry budget), the demo subscription upgraded now and downgraded at its period's
end; then headless Chromium (Debian's ``chromium``, through Playwright) opens the main pages
as the demo client and saves each. Nothing is kept but the images."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx

from stripe_emulator import EmulatorAdmin
from tests.support.browser import CHROMIUM, chromium, watched_page
from tests.support.local_up import running_up
from worker.local.seed import DEMO_ORG_ID, DEMO_SUBSCRIPTION_ID, DEMO_UNBILLED_ORG_ID

OUT = Path(__file__).resolve().parents[2] / "docs" / "images" / "console"
PAGES = {
    "home": "/console",
    "accounts": "/console/accounts",
    "failed-account": f"/console/accounts/{DEMO_UNBILLED_ORG_ID}",
    "account": f"/console/accounts/{DEMO_ORG_ID}",
    "subscription": f"/console/subscriptions/{DEMO_SUBSCRIPTION_ID}",
}
"""Each screenshot's name and the page it shows."""
FAST_RETRIES = {"BILLING_RETRY_MAX_ATTEMPTS": "3", "BILLING_RETRY_MAX_DELAY_SECONDS": "0.5"}


def _stage(api_url: str, emulator_url: str, auth: tuple[str, str]) -> None:
    """The story the pictures tell: a failed registration, and a plan change."""
    with httpx.Client(base_url=api_url, auth=auth, timeout=60) as api:
        with EmulatorAdmin(emulator_url) as emulator:
            emulator.add_fault("service_unavailable", "POST /v1/customers")
            try:
                api.post(
                    f"/v1beta1/organizations/{DEMO_UNBILLED_ORG_ID}/billing",
                    json={"body": {"name": "Acme Ltd", "email": "billing@acme.example"}},
                )
            finally:
                emulator.clear_faults()
        subscription = api.get(f"/v1beta1/operations/subscriptions/{DEMO_SUBSCRIPTION_ID}").json()[
            "subscription"
        ]
        change = (
            f"/v1beta1/organizations/{DEMO_ORG_ID}/billing/{subscription['billing_account_id']}"
            f"/subscriptions/{DEMO_SUBSCRIPTION_ID}/change"
        )
        if subscription["plan_id"] == "plan_starter":  # fresh: upgraded now, back at the end
            api.post(change, json={"plan_change": {"plan": "team", "immediate": True}})
        api.post(change, json={"plan_change": {"plan": "starter"}})


def take(out: Path = OUT) -> list[Path]:
    """Every page of :data:`PAGES`, saved under ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with (
        tempfile.TemporaryDirectory(prefix="console-screenshots-") as data_dir,
        running_up(Path(data_dir), **FAST_RETRIES) as stack,
    ):
        auth = (stack["client_id"], stack["client_secret"])
        _stage(stack["api_url"], stack["stripe_emulator_url"], auth)
        with chromium(CHROMIUM) as browser, watched_page(browser, stack["api_url"], auth) as w:
            for name, path in PAGES.items():
                w.page.goto(path)
                target = out / f"{name}.png"
                w.page.screenshot(path=str(target), full_page=True)
                written.append(target)
            if w.problems:
                raise SystemExit("the console misbehaved:\n" + "\n".join(w.problems))
    return written


if __name__ == "__main__":
    for path in take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(path)
