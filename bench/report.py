"""What a benchmark section returns, and the table run.py prints."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    """One figure measured once per run; the table shows every run and the median."""

    metric: str
    unit: str
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def format_table(section: str, measurements: Sequence[Measurement]) -> str:
    runs = max((len(m.values) for m in measurements), default=0)
    header = ["section", "metric", "unit", *(f"run {i + 1}" for i in range(runs)), "median"]
    rows = [
        [
            section,
            m.metric,
            m.unit,
            *(_fmt(v) for v in m.values),
            *([""] * (runs - len(m.values))),
            _fmt(m.median),
        ]
        for m in measurements
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines)
