"""``run_benchmark``: time a loader at several worker counts. Pure timing: no printing, no Rich.

One runner, ``time_run``, times every loader: streamcli's, and each loader of the ``benchmarks/`` harness (the
torch ``DataLoader`` baseline among them). A run builds a fresh loader, times its first batch (from construction),
pulls ``warmup`` batches untimed (worker start-up, caches), then times ``batches`` more.

**Wait** has one definition, used by the ``bench`` command and by the harness alike: the wall time the
consumer spends inside ``next()`` on the loader's iterator, measured around the call by ``timed_next``. It
includes the loader's own work in ``next()`` (assembly, hand-off), not only the time spent waiting for
producers; it is the cost a training loop sees.

**Busy** is each worker's busy fraction as the loader reports it at the end of the timed window (over its last
few seconds); the ``bench`` command's verdict reads their spread to tell imbalance between workers from a slow
hand-off. The figures a run yields and their medians (``Run``, ``BenchResult``) are ``bench_results``'.
"""

from __future__ import annotations

import functools
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from streamcli.bench_results import BenchResult as BenchResult
from streamcli.bench_results import Run as Run
from streamcli.bench_results import summarize as summarize
from streamcli.stats import LoaderStats

BUSY_GRACE_S = 0.3  # how long a run may go on, untimed, until the loader has a busy figure


class Timeable(Protocol):
    """What ``time_run`` needs of a loader; a ``stats`` attribute (``LoaderStats``) is read when present."""

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Probe(Protocol):
    """Hooks around the timed window of a run (e.g. CPU accounting in the harness)."""

    def start(self, loader: Any) -> None: ...

    def stop(self, loader: Any) -> None: ...


def timed_next(it: Iterator[Any]) -> tuple[Any | None, float]:
    """The next batch (None at the end) and the wait: the seconds spent inside ``next()``."""
    t = time.perf_counter()
    batch = next(it, None)
    return batch, time.perf_counter() - t


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


def _forever(loader: Timeable) -> Iterator[Any]:
    """Batches across epochs, so short sources can still be timed."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return


def _stats(loader: object) -> LoaderStats | None:
    s = getattr(loader, "stats", None)
    return s if isinstance(s, LoaderStats) else None


def _busy(s: LoaderStats | None) -> tuple[float, ...]:
    # The loader computes busy from samples taken at most every 0.1 s; before it has two it reports zeros.
    # Workers that just produced the timed batches were not 0% busy, so all zeros means "unknown".
    if s is None or not any(x > 0 for x in s.worker_busy):
        return ()
    return s.worker_busy


def time_run(
    make_loader: Callable[[], Timeable],
    batches: int,
    warmup: int,
    *,
    consume: Callable[[Any], object] | None = None,
    probe: Probe | None = None,
    across_epochs: bool = True,
    sample_rss: bool = True,
) -> Run:
    """One run of a fresh loader; see the module docstring. ``consume(batch)`` stands for the training step."""
    t0 = time.perf_counter()
    loader = make_loader()
    stream_names: Callable[[int], str] | None = getattr(loader, "stream_name", None)
    try:
        it = _forever(loader) if across_epochs else iter(loader)
        batch, _ = timed_next(it)
        first = time.perf_counter() - t0
        short = batch is None
        for _ in range(warmup):
            if batch is None:
                break
            if consume is not None:
                consume(batch)
            del batch
            batch, _ = timed_next(it)
        del batch
        peak, waits, n = 0.0, [], 0
        s0 = _stats(loader)
        if probe is not None:
            probe.start(loader)
        t_start = time.perf_counter()
        while n < batches and not short:
            batch, wait = timed_next(it)
            if batch is None:
                short = True
                break
            waits.append(wait)
            n += 1
            if consume is not None:
                consume(batch)
            del batch
            if sample_rss and n % 16 == 0:
                peak = max(peak, _rss_mb())
        elapsed = max(time.perf_counter() - t_start, 1e-9)
        s1 = s_busy = _stats(loader)  # counters and the busy sample at the very end of the timed window
        # The loader samples busy at most every 0.1 s; a run shorter than that has no figure yet. Keep the
        # loader going (untimed, same consumer) for up to BUSY_GRACE_S until it has one; else busy is unknown.
        deadline = time.perf_counter() + BUSY_GRACE_S
        while s_busy is not None and not _busy(s_busy) and not short and time.perf_counter() < deadline:
            batch = next(it, None)
            if batch is None:
                break
            if consume is not None:
                consume(batch)
            del batch
            s_busy = _stats(loader)
        if probe is not None:
            probe.stop(loader)
        if sample_rss:
            peak = max(peak, _rss_mb())
        window = int(getattr(loader, "prefetch", 0))
        del it
    finally:
        loader.close()
    streams: tuple[str, ...] = ()
    if s_busy is not None and s_busy.worker_stream and stream_names is not None:
        streams = tuple(stream_names(i) if i >= 0 else "" for i in s_busy.worker_stream)
    return Run(
        first_batch_s=first,
        batches=n,
        elapsed_s=elapsed,
        waits_s=waits,
        steps=s1.steps - s0.steps if s0 is not None and s1 is not None else 0,
        bytes=s1.bytes - s0.bytes if s0 is not None and s1 is not None else 0,
        busy_per_worker=_busy(s_busy),
        stream_per_worker=streams,
        room=(n * s1.steps_per_batch) if s1 is not None else 0,
        peak_rss_mb=peak,
        short=short or n < batches,
        window=window,
        rows_moved=s_busy.rows_moved if s_busy is not None else 0,
        balanced=s_busy.balanced if s_busy is not None else False,
        streams=s_busy.streams_total if s_busy is not None else 0,
        longest_stream=s_busy.longest_stream if s_busy is not None else None,
        epoch_steps=s_busy.epoch_steps if s_busy is not None else None,
    )


def run_benchmark(
    make_loader: Callable[[int], Timeable],
    workers: Sequence[int] = (0, 1, 2),
    *,
    batches: int = 100,
    warmup: int = 10,
    repeats: int = 3,
    on_run: Callable[[str, int, int], None] | None = None,
    name: str = "streamcli",
) -> list[BenchResult]:
    """Time ``make_loader(w)`` for each worker count ``w``; ``on_run(name, w, repeat)`` reports progress."""
    out = []
    for w in workers:
        runs = []
        for r in range(repeats):
            if on_run is not None:
                on_run(name, w, r)
            runs.append(time_run(functools.partial(make_loader, w), batches, warmup))
        out.append(summarize(name, w, runs))
    return out
