"""Helpers for the emulator tests: running emulator processes, clients, real-Stripe cleanup."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from worker.stripe_emulator import EmulatorAdmin

ROOT = Path(__file__).resolve().parents[2]
EMULATOR_KEY = "sk_test_emulator"
SECOND_KEY = "sk_test_emulator_second_key"

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class EmulatorProcess:
    """An emulator started with ``python -m worker.stripe_emulator``."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode


def start_emulator(log_path: Path, *args: str, ready_timeout: float = 15.0) -> EmulatorProcess:
    """Start an emulator on a free port and wait until its admin API answers."""
    port = free_port()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "worker.stripe_emulator", "--port", str(port), *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    emulator = EmulatorProcess(process, f"http://127.0.0.1:{port}", log_path)
    try:
        with EmulatorAdmin(emulator.url) as admin:
            admin.wait_until_ready(ready_timeout)
    except TimeoutError:
        emulator.stop(signal.SIGKILL)
        raise RuntimeError(f"emulator did not start:\n{emulator.log()}") from None
    return emulator


@contextlib.contextmanager
def running_emulator(log_path: Path, *args: str) -> Iterator[EmulatorProcess]:
    emulator = start_emulator(log_path, *args)
    try:
        yield emulator
    finally:
        emulator.stop()


def sdk_client(
    url: str,
    api_key: str = EMULATOR_KEY,
    *,
    retries: int = 0,
    timeout: float | None = None,
) -> stripe.StripeClient:
    """A StripeClient pointed at an emulator, as the application would build one."""
    http_client = stripe.RequestsClient(timeout=timeout) if timeout is not None else None
    return stripe.StripeClient(
        api_key,
        base_addresses={"api": url},
        max_network_retries=retries,
        http_client=http_client,
    )


def unique(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@dataclass
class StripeTarget:
    """Where a contract test runs: the emulator, or real Stripe test mode."""

    name: str
    client: stripe.StripeClient
    admin: EmulatorAdmin | None
    customers: list[str] = field(default_factory=list)
    products: list[str] = field(default_factory=list)
    prices: list[str] = field(default_factory=list)

    @property
    def is_emulator(self) -> bool:
        return self.admin is not None

    def eventually(self, probe: Callable[[], T], done: Callable[[T], bool]) -> T:
        """``probe()`` until ``done``: real Stripe's search index lags writes by up to a minute."""
        deadline = time.monotonic() + (0 if self.is_emulator else 90)
        while True:
            result = probe()
            if done(result) or time.monotonic() >= deadline:
                return result
            time.sleep(2)

    def cleanup(self) -> None:
        """Remove what a test created on real Stripe (the emulator is simply reset)."""
        if self.is_emulator:
            return
        for customer in self.customers:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.customers.delete(customer)  # also cancels its subscriptions
        for price in self.prices:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.prices.update(price, params={"active": False})
        for product in self.products:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.products.update(product, params={"active": False})

    # Creation helpers that remember what to clean up.

    def customer(self, **params: object) -> stripe.Customer:
        customer = self.client.v1.customers.create(params=params)  # type: ignore[arg-type]
        self.customers.append(customer.id)
        return customer

    def product(self, **params: object) -> stripe.Product:
        params.setdefault("name", unique("product"))
        product = self.client.v1.products.create(params=params)  # type: ignore[arg-type]
        self.products.append(product.id)
        return product

    def price(self, **params: object) -> stripe.Price:
        params.setdefault("currency", "usd")
        params.setdefault("unit_amount", 1500)
        if "product" not in params and "product_data" not in params:
            params["product"] = self.product().id
        price = self.client.v1.prices.create(params=params)  # type: ignore[arg-type]
        self.prices.append(price.id)
        self.products.append(price.product if isinstance(price.product, str) else price.product.id)
        return price


def real_stripe_key() -> str | None:
    return os.environ.get("STRIPE_TEST_API_KEY") or None
