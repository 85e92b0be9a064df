"""What a benchmark reports: figures, each beside the baseline measured in the same run, and
the issue's target where there is one; printed as a table and written as JSON."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Compared = Literal["ratio", "difference", "value"]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Target:
    """``on`` (the ratio to the baseline, the difference from it, or the value itself)
    ``op`` ``bound``: e.g. the ratio >= 0.6."""

    op: str
    bound: float
    on: Compared = "ratio"
    text: str = ""

    def holds(self, figure: Figure) -> bool | None:
        compared = {"ratio": figure.ratio, "difference": figure.difference, "value": figure.value}
        measured = compared[self.on]
        if measured is None or math.isnan(measured):
            return None
        return _OPERATORS[self.op](measured, self.bound)

    def to_json(self) -> dict[str, Any]:
        return {"on": self.on, "op": self.op, "bound": self.bound, "text": self.describe()}

    def describe(self) -> str:
        return self.text or f"{self.on} {self.op} {self.bound:g}"


@dataclass
class Figure:
    """One measured figure and its baseline (same unit, same run)."""

    id: str
    label: str
    value: float
    unit: str
    baseline: float | None
    baseline_label: str
    target: Target | None = None
    also_required: bool = True
    """A condition of the target the numbers do not show (P4: no errors)."""
    details: dict[str, Any] = field(default_factory=dict)
    shown: Literal["ratio", "difference"] | None = None
    """How the table compares it with its baseline; by default as its target does (else
    the ratio)."""

    @property
    def comparison(self) -> Literal["ratio", "difference"]:
        if self.shown is not None:
            return self.shown
        return "difference" if self.target and self.target.on == "difference" else "ratio"

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0 or math.isnan(self.value):
            return None
        return self.value / self.baseline

    @property
    def difference(self) -> float | None:
        if self.baseline is None or math.isnan(self.value):
            return None
        return self.value - self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the target is met; ``None`` where there is no target or no measure."""
        if self.target is None:
            return None
        held = self.target.holds(self)
        return None if held is None else held and self.also_required

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "value": _finite(self.value),
            "unit": self.unit,
            "baseline": _finite(self.baseline),
            "baseline_label": self.baseline_label,
            "ratio": _finite(self.ratio),
            "difference": _finite(self.difference),
            "target": self.target.to_json() if self.target else None,
            "met": self.met,
            "details": _json_safe(self.details),
        }


def _json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as ``null`` (JSON has neither), recursively."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


def _finite(number: float | None) -> float | None:
    """JSON has no NaN: a figure that could not be measured is ``null``."""
    if number is None or math.isnan(number) or math.isinf(number):
        return None
    return round(number, 6)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN when there is nothing to rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _number(value: float | None, unit: str = "") -> str:
    if value is None or math.isnan(value):
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if value else "0"
    return f"{text} {unit}".strip()


def table(title: str, figures: Sequence[Figure]) -> str:
    """A Markdown table: each figure beside its baseline, the ratio, the target."""
    lines = [
        f"### {title}",
        "",
        "| figure | ours | baseline (same run) | ours vs baseline | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for figure in figures:
        met = {True: "yes", False: "**no**", None: "-"}[figure.met]
        baseline = (
            f"{_number(figure.baseline, figure.unit)} ({figure.baseline_label})"
            if figure.baseline is not None
            else figure.baseline_label or "-"
        )
        if figure.comparison == "difference":
            difference = figure.difference
            versus = "-" if difference is None else f"{difference:+.3g} {figure.unit}"
        else:
            versus = "-" if figure.ratio is None else f"ratio {figure.ratio:.2f}"
        lines.append(
            f"| {figure.label} | {_number(figure.value, figure.unit)} | {baseline} | {versus} "
            f"| {figure.target.describe() if figure.target else '-'} | {met} |"
        )
    return "\n".join(lines)
