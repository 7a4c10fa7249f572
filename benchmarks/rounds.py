"""Benchmark rounds: each row run once a round, interleaved, and the ratios of their rates (the small-step and
token benchmarks share them)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks import report
from streamcli import StreamLoader

Rates = dict[str, list[float]]  # row name -> its rate in each round


@dataclass(frozen=True)
class Plan:
    """How long a section runs: ``rounds`` rounds of ``batches`` timed batches after ``warmup``."""

    rounds: int
    batches: int
    warmup: int
    max_workers: int


# --- timing ------------------------------------------------------------------------------------------------


def timed(batches: Iterator[Any], warmup: int, n: int) -> float:
    """Seconds per batch over ``n`` batches of ``batches``, after ``warmup`` untimed ones (each dropped at once)."""
    for _ in range(warmup):
        next(batches)
    t0 = time.perf_counter()
    for _ in range(n):
        next(batches)
    return (time.perf_counter() - t0) / n


def streamcli_rate(source: Any, plan: Plan, workers: int, **kw: Any) -> float:
    """Batches/s of a fresh ``StreamLoader`` over ``source``; worker start-up is outside the timed window."""
    with StreamLoader(source, num_workers=workers, seed=0, boundary="pack", **kw) as loader:
        return 1.0 / timed(iter(loader), plan.warmup, plan.batches)


def rounds(rows: dict[str, Callable[[], float]], n: int, log: Callable[[str], None]) -> Rates:
    """Each row run once per round, rows interleaved and their order reversed every other round."""
    got: Rates = {name: [] for name in rows}
    for r in range(n):
        for name in list(rows)[:: -1 if r % 2 else 1]:
            got[name].append(rows[name]())
        log(f"  round {r + 1}/{n}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in got.items()))
    return got


def vs(rates: Rates, mine: str, other: str) -> str:
    """``mine``'s rate over ``other``'s, the median of the rounds' ratios with their range."""
    value, spread = report.ratio(_runs(rates[mine]), _runs(rates[other]))
    return f"{value:.2f}x ({spread})"


def _runs(rates: list[float]) -> dict[str, Any]:
    return {"rate": statistics.median(rates), "rates": rates}
