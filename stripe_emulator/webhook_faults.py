"""Faults injected into webhook deliveries (``/_emulator/webhooks/faults``).

A rule matches deliveries by event type glob (``match``: ``"invoice.*"``, default ``"*"``) and
optionally by endpoint id, and fires with ``probability`` (drawn from a seedable RNG, reseeded
by ``POST /_emulator/faults/seed`` and by a reset, so a run is reproducible) until it has fired
``count`` times (``None`` = forever). Each attempt of a delivery (retries included) is judged
on its own. Kinds:

============  ==================================================================================
``drop``      the attempt is never sent and the delivery never retried (``pending_webhooks``
              of the event stays as it was, as after Stripe gives up)
``delay``     the attempt is sent ``seconds`` later; deliveries behind it go on meanwhile, so
              they may overtake it
``duplicate`` the attempt is sent twice, one right after the other (same body, each signed
              when sent): receivers must be idempotent, as Stripe delivers at least once
``reorder``   the endpoint's next ``window`` deliveries (waiting at most ``hold_seconds`` for
              them to arrive) are held and then sent in reverse order (``order: "reverse"``) or
              shuffled (``"shuffle"``); ``count`` counts windows
============  ==================================================================================

A ``drop`` that fires wins over the other kinds for that attempt; ``delay`` and ``duplicate``
combine. All of it is on the wall clock, not the emulator clock.
"""

from __future__ import annotations

import fnmatch
import random
import re
from dataclasses import dataclass, field
from typing import Any, Final

KINDS: Final = ("drop", "delay", "duplicate", "reorder")
ORDERS: Final = ("reverse", "shuffle")
MAX_SECONDS: Final = 300.0


@dataclass(slots=True)
class DeliveryFault:
    """One rule (see the module docstring)."""

    id: str
    kind: str
    match: str = "*"
    endpoint: str | None = None
    probability: float = 1.0
    count: int | None = None
    seconds: float = 0.0
    window: int = 2
    order: str = "reverse"
    hold_seconds: float = 1.0
    fired: int = 0
    _pattern: re.Pattern[str] = field(default=re.compile(".*"), repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            known = ", ".join(KINDS)
            raise ValueError(f"unknown delivery fault kind {self.kind!r}; one of {known}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.count is not None and self.count < 0:
            raise ValueError("count must be >= 0")
        if self.kind == "delay" and not 0 < self.seconds <= MAX_SECONDS:
            raise ValueError(f"a delay fault needs 0 < seconds <= {MAX_SECONDS:g}")
        if self.window < 2:
            raise ValueError("window must be >= 2")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}")
        if not 0 < self.hold_seconds <= MAX_SECONDS:
            raise ValueError(f"hold_seconds must be in (0, {MAX_SECONDS:g}]")
        self._pattern = re.compile(fnmatch.translate(self.match.strip() or "*"))

    def matches(self, event_type: str, endpoint: str) -> bool:
        return (self.endpoint in (None, endpoint)) and self._pattern.match(event_type) is not None

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "match": self.match,
            "endpoint": self.endpoint,
            "probability": self.probability,
            "count": self.count,
            "seconds": self.seconds,
            "window": self.window,
            "order": self.order,
            "hold_seconds": self.hold_seconds,
            "fired": self.fired,
        }


@dataclass(slots=True)
class Plan:
    """What happens to one attempt."""

    drop: bool = False
    delay: float = 0.0
    duplicate: bool = False

    @property
    def names(self) -> str | None:
        flags = (("drop", self.drop), ("delay", self.delay), ("duplicate", self.duplicate))
        parts = [name for name, on in flags if on]
        return "+".join(parts) or None


class DeliveryFaults:
    def __init__(self) -> None:
        self.rules: list[DeliveryFault] = []
        # Reproducible fault sequences for tests, not security: a seeded PRNG is the point.
        self.rng = random.Random(0)  # noqa: S311
        self._next_id = 1

    def add(self, **fields: Any) -> DeliveryFault:
        rule = DeliveryFault(id=f"wfl_{self._next_id}", **fields)
        self._next_id += 1
        self.rules.append(rule)
        return rule

    def remove(self, rule_id: str) -> bool:
        before = len(self.rules)
        self.rules = [rule for rule in self.rules if rule.id != rule_id]
        return len(self.rules) != before

    def clear(self) -> None:
        self.rules.clear()

    def seed(self, value: int) -> None:
        self.rng.seed(value)

    def _fires(self, rule: DeliveryFault, event_type: str, endpoint: str) -> bool:
        if rule.exhausted or not rule.matches(event_type, endpoint):
            return False
        if rule.probability < 1.0 and self.rng.random() >= rule.probability:
            return False
        rule.fired += 1
        return True

    def plan(self, event_type: str, endpoint: str) -> Plan:
        """The drop/delay/duplicate faults for one attempt."""
        plan = Plan()
        for rule in self.rules:
            if rule.kind == "reorder" or not self._fires(rule, event_type, endpoint):
                continue
            if rule.kind == "drop":
                return Plan(drop=True)
            if rule.kind == "delay":
                plan.delay += rule.seconds
            else:
                plan.duplicate = True
        return plan

    def reorder_rule(self, event_type: str, endpoint: str) -> DeliveryFault | None:
        """A reorder rule firing for a window starting with this delivery, if any."""
        for rule in self.rules:
            if rule.kind == "reorder" and self._fires(rule, event_type, endpoint):
                return rule
        return None

    def reorder(self, batch: list[Any], rule: DeliveryFault) -> list[Any]:
        if rule.order == "shuffle":
            shuffled = list(batch)
            self.rng.shuffle(shuffled)
            return shuffled
        return list(reversed(batch))
