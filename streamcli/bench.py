"""``run_benchmark``: time a loader at several worker counts. Pure timing: no printing, no Rich.

Each configuration is run ``repeats`` times in a fresh loader: ``warmup`` batches are pulled and thrown
away (worker start-up, caches), then ``batches`` are timed. Results are medians over the repeats.
``run_baseline`` times the honest hand-rolled alternative: a plain ``torch.utils.data.DataLoader`` over an
``IterableDataset`` that yields windows of T steps of the same source, B per batch.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from streamcli.source import StreamSource, call_setup_worker


@dataclass(frozen=True)
class BenchResult:
    """Medians over the repeats of one configuration."""

    name: str
    workers: int
    batches_per_s: float
    steps_per_s: float
    mb_per_s: float
    wait_p50_ms: float
    wait_p95_ms: float
    busy: float  # mean worker busy fraction (0-1); NaN when unknown
    first_batch_s: float
    peak_rss_mb: float
    repeats: int
    batches: int

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in asdict(self).items()}


def _rss_mb() -> float:
    """Resident memory of this process and its children now, in MB (psutil if present)."""
    try:
        import psutil

        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return float(total) / 1e6
    except ImportError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def _forever(loader: Any) -> Iterator[Any]:
    """Batches across epochs, so short sources can still be timed."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return


def _time_one(make_loader: Callable[[int], Any], workers: int, batches: int, warmup: int) -> dict[str, float]:
    loader = make_loader(workers)
    try:
        it = _forever(loader)
        peak = 0.0
        for _ in range(warmup):
            if next(it, None) is None:
                break
        s0 = loader.stats
        t0 = time.perf_counter()
        n = 0
        for n, batch in enumerate(it, 1):
            del batch
            if n % 16 == 0:
                peak = max(peak, _rss_mb())
            if n >= batches:
                break
        dt = time.perf_counter() - t0
        s1 = loader.stats
        peak = max(peak, _rss_mb())
    finally:
        loader.close()
    dt = max(dt, 1e-9)
    waits = np.asarray(s1.waits_s[-max(n, 1) :], dtype=np.float64) * 1e3
    # The loader samples worker load every 0.1 s; a run shorter than two samples reads as all zeros although
    # steps were made. That is "unknown" (NaN), not 0% busy.
    sampled = bool(s1.worker_busy) and (max(s1.worker_busy) > 0.0 or s1.steps == s0.steps)
    busy = float(np.mean(s1.worker_busy)) if sampled else float("nan")
    return {
        "batches_per_s": n / dt,
        "steps_per_s": (s1.steps - s0.steps) / dt,
        "mb_per_s": (s1.bytes - s0.bytes) / 1e6 / dt,
        "wait_p50_ms": float(np.percentile(waits, 50)) if waits.size else 0.0,
        "wait_p95_ms": float(np.percentile(waits, 95)) if waits.size else 0.0,
        "busy": busy,
        "first_batch_s": float(s1.first_batch_s or 0.0),
        "peak_rss_mb": peak,
        "batches": float(n),
    }


def _median(runs: Sequence[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in runs if r[key] == r[key]]
    return float(statistics.median(vals)) if vals else float("nan")


def run_benchmark(
    make_loader: Callable[[int], Any],
    workers: Sequence[int] = (0, 1, 2),
    *,
    batches: int = 100,
    warmup: int = 10,
    repeats: int = 3,
    on_run: Callable[[str, int, int], None] | None = None,
) -> list[BenchResult]:
    """Time ``make_loader(w)`` for each worker count ``w``; ``on_run(name, w, repeat)`` reports progress."""
    out = []
    for w in workers:
        runs = []
        for r in range(repeats):
            if on_run is not None:
                on_run("streamcli", w, r)
            runs.append(_time_one(make_loader, w, batches, warmup))
        out.append(_result("streamcli", w, runs, repeats))
    return out


def _result(name: str, w: int, runs: Sequence[dict[str, float]], repeats: int) -> BenchResult:
    return BenchResult(
        name=name,
        workers=w,
        batches_per_s=_median(runs, "batches_per_s"),
        steps_per_s=_median(runs, "steps_per_s"),
        mb_per_s=_median(runs, "mb_per_s"),
        wait_p50_ms=_median(runs, "wait_p50_ms"),
        wait_p95_ms=_median(runs, "wait_p95_ms"),
        busy=_median(runs, "busy"),
        first_batch_s=_median(runs, "first_batch_s"),
        peak_rss_mb=max(r["peak_rss_mb"] for r in runs),
        repeats=repeats,
        batches=int(min(r["batches"] for r in runs)),
    )


def bottleneck(r: BenchResult) -> str:
    """One line naming what limits this configuration."""
    if r.workers == 0:
        return (
            f"decode-bound, in-process: the consumer's own thread produces every step ({r.steps_per_s:.0f} steps/s, "
            f"waits {r.wait_p50_ms:.0f} ms p50); workers help when cores are free"
        )
    if r.busy != r.busy:  # unknown: the timed run was shorter than the loader's load sampling
        load = "worker load unknown (run more --batches to measure it)"
        if r.wait_p50_ms < 1.0:
            return f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50); {load}"
        return f"waits {r.wait_p50_ms:.1f} ms (p50); {load}"
    busy = r.busy * 100
    if busy >= 80 and r.wait_p50_ms >= 1.0:
        return f"decode-bound: workers {busy:.0f}% busy, consumer waits {r.wait_p50_ms:.0f} ms (p50)"
    if r.wait_p50_ms < 1.0:
        return (
            f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50), workers {busy:.0f}% busy"
        )
    return f"hand-off-bound: workers {busy:.0f}% busy but the consumer waits {r.wait_p50_ms:.1f} ms (p50)"


# ----------------------------------------------------------------------------------------------------------
# Baseline: a plain torch DataLoader.


class _Windows:
    """Windows of ``time_steps`` consecutive steps per stream, split over DataLoader workers."""

    def __init__(self, source: StreamSource, time_steps: int) -> None:
        self.source = source
        self.time_steps = time_steps

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        import torch.utils.data as tud

        info = tud.get_worker_info()
        call_setup_worker(self.source)  # part of the source contract (e.g. thread limits): the baseline too
        items = list(self.source.items())
        if info is not None:
            items = items[info.id :: info.num_workers]
        names = [f.name for f in self.source.fields()]
        while True:  # loop over the items again so that short sources can be timed
            for item in items:
                window: list[Any] = []
                for step in self.source.open(item):
                    window.append(step)
                    if len(window) == self.time_steps:
                        yield {k: np.stack([np.asarray(s[k]) for s in window]) for k in names}
                        window = []


def run_baseline(
    source: StreamSource,
    batch_size: int,
    time_steps: int,
    workers: Sequence[int] = (0, 1, 2),
    *,
    batches: int = 100,
    warmup: int = 10,
    repeats: int = 3,
) -> list[BenchResult]:
    """Time a plain ``torch.utils.data.DataLoader`` at the same sizes (batches are (B, T, ...), not coherent)."""
    import torch.utils.data as tud

    dataset_cls = __getattr__("WindowDataset")
    out = []
    for w in workers:
        runs = []
        for _ in range(repeats):
            t_start = time.perf_counter()
            dl = tud.DataLoader(
                dataset_cls(source, time_steps),
                batch_size=batch_size,
                num_workers=w,
                multiprocessing_context="spawn" if w else None,
            )
            it = iter(dl)
            first = None
            peak = 0.0
            for _ in range(warmup):
                next(it)
                first = first or time.perf_counter() - t_start
            t0 = time.perf_counter()
            waits = []
            nbytes = 0
            for n in range(1, batches + 1):
                t = time.perf_counter()
                b = next(it)
                waits.append(time.perf_counter() - t)
                nbytes += sum(v.numel() * v.element_size() for v in b.values())
                if n % 16 == 0:
                    peak = max(peak, _rss_mb())
            dt = max(time.perf_counter() - t0, 1e-9)
            del it, dl
            wa = np.asarray(waits) * 1e3
            runs.append(
                {
                    "batches_per_s": batches / dt,
                    "steps_per_s": batches * batch_size * time_steps / dt,
                    "mb_per_s": nbytes / 1e6 / dt,
                    "wait_p50_ms": float(np.percentile(wa, 50)),
                    "wait_p95_ms": float(np.percentile(wa, 95)),
                    "busy": float("nan"),
                    "first_batch_s": float(first or 0.0),
                    "peak_rss_mb": peak,
                    "batches": float(batches),
                }
            )
        out.append(_result("torch DataLoader", w, runs, repeats))
    return out


def __getattr__(name: str) -> Any:
    # The DataLoader needs an IterableDataset subclass, picklable by reference for spawn workers, but torch
    # must not be imported with this module; so the class is made on first access, here and in workers.
    if name == "WindowDataset":
        import torch.utils.data as tud

        cls = type("WindowDataset", (_Windows, tud.IterableDataset), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
