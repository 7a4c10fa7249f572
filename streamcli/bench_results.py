"""What a benchmark run measured (``Run``) and what is reported for a configuration: the medians over its
repeats (``BenchResult``, from ``summarize``).

Separate from ``bench``, which times loaders: these are plain figures and their medians, which the ``bench``
command's report and verdict read without timing anything.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

NAN = float("nan")


@dataclass
class Run:
    """The raw figures of one timed run."""

    first_batch_s: float
    batches: int
    elapsed_s: float
    waits_s: list[float]
    steps: int  # valid steps in the timed window (0 when the loader keeps no stats)
    bytes: int
    busy_per_worker: tuple[float, ...]  # over the timed window; () when unknown
    stream_per_worker: tuple[str, ...]  # stream each worker read at the end; () when unknown
    room: int  # steps the timed batches had room for (B x T each); 0 when unknown
    peak_rss_mb: float
    short: bool  # the loader ran out before ``batches`` were timed
    window: int = 0  # batches the workers could write ahead at the end (``StreamLoader.prefetch``); 0 when unknown
    rows_moved: int = 0  # rows given mid-stream to an idle worker, over the loader's life
    balanced: bool = False  # rows went to whichever worker was free (``LoaderStats.balanced``) by the end
    streams: int = 0  # the epoch's streams (``LoaderStats.streams_total``); 0 when unknown
    longest_stream: int | None = None  # the epoch's longest stream and all its steps (``padding_hint``)
    epoch_steps: int | None = None


@dataclass(frozen=True)
class BenchResult:
    """Medians over the repeats of one configuration."""

    name: str
    workers: int
    batches_per_s: float
    steps_per_s: float
    mb_per_s: float
    wait_p50_ms: float  # time inside next() (see ``streamcli.bench``)
    wait_p95_ms: float
    busy: float  # mean worker busy fraction (0-1); NaN when unknown
    first_batch_s: float
    peak_rss_mb: float
    repeats: int
    batches: int
    busy_per_worker: tuple[float, ...] = ()  # per worker, median over the repeats; () when unknown
    stream_per_worker: tuple[str, ...] = ()  # stream each worker read at the end of the last run, if known
    useful_share: float = NAN  # share of the delivered steps that are real data (not padding); NaN if unknown
    window: int = 0  # batches the workers could write ahead at the end of the last run; 0 when unknown
    rows_moved: int = 0  # median over the runs
    balanced: bool = False  # balance was on by the end of the last run (``LoaderStats.balanced``)
    streams: int = 0  # the last run's epoch: its streams, longest stream and steps (``padding_hint``)
    longest_stream: int | None = None
    epoch_steps: int | None = None

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and v != v:
                return None
            return [clean(x) for x in v] if isinstance(v, (tuple, list)) else v

        return {k: clean(v) for k, v in asdict(self).items()}


def _median(vals: Sequence[float]) -> float:
    vals = [v for v in vals if v == v]
    return float(statistics.median(vals)) if vals else NAN


def summarize(name: str, workers: int, runs: Sequence[Run]) -> BenchResult:
    """Medians over ``runs``; per-worker busy is the median per worker."""

    def med(fn: Callable[[Run], float]) -> float:
        return _median([fn(r) for r in runs])

    def pct(r: Run, q: float) -> float:
        return float(np.percentile(r.waits_s, q)) * 1e3 if r.waits_s else NAN

    known = [r.busy_per_worker for r in runs if r.busy_per_worker]
    same = len({len(b) for b in known}) == 1
    per_worker = tuple(_median(col) for col in zip(*known, strict=True)) if known and same else ()
    return BenchResult(
        name=name,
        workers=workers,
        batches_per_s=med(lambda r: r.batches / r.elapsed_s),
        steps_per_s=med(lambda r: r.steps / r.elapsed_s if r.steps else NAN),
        mb_per_s=med(lambda r: r.bytes / 1e6 / r.elapsed_s if r.bytes else NAN),
        wait_p50_ms=med(lambda r: pct(r, 50)),
        wait_p95_ms=med(lambda r: pct(r, 95)),
        busy=float(np.mean(per_worker)) if per_worker else NAN,
        first_batch_s=med(lambda r: r.first_batch_s),
        peak_rss_mb=max(r.peak_rss_mb for r in runs),
        repeats=len(runs),
        batches=min(r.batches for r in runs),
        busy_per_worker=per_worker,
        stream_per_worker=runs[-1].stream_per_worker,
        useful_share=med(lambda r: r.steps / r.room if r.room else NAN),
        window=runs[-1].window,
        rows_moved=int(med(lambda r: r.rows_moved)),
        balanced=runs[-1].balanced,
        streams=runs[-1].streams,
        longest_stream=runs[-1].longest_stream,
        epoch_steps=runs[-1].epoch_steps,
    )
