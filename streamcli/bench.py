"""``run_benchmark``: time a loader at several worker counts. Pure timing: no printing, no Rich.

One runner, ``time_run``, times every loader: streamcli's, the torch ``DataLoader`` baseline here, and each
loader of the ``benchmarks/`` harness. A run builds a fresh loader, times its first batch (from construction),
pulls ``warmup`` batches untimed (worker start-up, caches), then times ``batches`` more.

**Wait** has one definition, used by the ``bench`` command and by the harness alike: the wall time the
consumer spends inside ``next()`` on the loader's iterator, measured around the call by ``timed_next``. It
includes the loader's own work in ``next()`` (assembly, hand-off), not only the time spent waiting for
producers; it is the cost a training loop sees.

**Busy** is each worker's busy fraction as the loader reports it at the end of the timed window (over its last
few seconds); ``bottleneck`` reads their spread to tell imbalance between workers from a slow hand-off.

``run_baseline`` times the honest hand-written alternative, ``TorchBaseline``: a plain
``torch.utils.data.DataLoader`` whose workers each own a block of rows and fill coherent ``(T, rows, ...)``
chunks, as a careful user would write it.
"""

from __future__ import annotations

import functools
import gc
import resource
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from streamcli.source import Field, StreamSource, call_setup_worker, uses_blocks
from streamcli.stats import LoaderStats

NAN = float("nan")
BUSY_GRACE_S = 0.3  # how long a run may go on, untimed, until the loader has a busy figure


class Timeable(Protocol):
    """What ``time_run`` needs of a loader; a ``stats`` attribute (``LoaderStats``) is read when present."""

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Probe(Protocol):
    """Hooks around the timed window of a run (e.g. CPU accounting in the harness)."""

    def start(self, loader: Any) -> None: ...

    def stop(self, loader: Any) -> None: ...


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
    window: int = 0  # batches the workers could write ahead at the end (``StreamLoader.window``); 0 when unknown
    rows_moved: int = 0  # rows given mid-stream to an idle worker, over the loader's life


@dataclass(frozen=True)
class BenchResult:
    """Medians over the repeats of one configuration."""

    name: str
    workers: int
    batches_per_s: float
    steps_per_s: float
    mb_per_s: float
    wait_p50_ms: float  # time inside next() (see the module docstring)
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

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and v != v:
                return None
            return [clean(x) for x in v] if isinstance(v, (tuple, list)) else v

        return {k: clean(v) for k, v in asdict(self).items()}


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
        window = int(getattr(loader, "window", 0))
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
    )


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


def scheduling(r: BenchResult) -> str | None:
    """How the workers shared the streams (2 or more workers): the window they wrote ahead in, the rows that
    moved between them (streams of unknown length); None in-process or when unknown."""
    if r.workers < 2 or not r.window:
        return None
    return f"window {r.window} batches ahead; {r.rows_moved} rows moved to an idle worker"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x == x else "-"


def imbalance(r: BenchResult) -> str | None:
    """A description of uneven work between workers (busiest >= 80% and 30 points above the idlest), else None."""
    busy = r.busy_per_worker
    if r.workers < 2 or len(busy) < 2:
        return None
    hi, lo = int(np.argmax(busy)), int(np.argmin(busy))
    if busy[hi] < 0.8 or busy[hi] - busy[lo] <= 0.3:
        return None
    text = f"imbalanced: worker {hi} is {_pct(busy[hi])} busy, worker {lo} {_pct(busy[lo])}"
    names = r.stream_per_worker
    if len(names) > hi and names[hi]:
        text += f"; at the end it was reading {names[hi]!r}"
    return text + " (the work is not spread evenly over the workers)"


def bottleneck(r: BenchResult) -> str:
    """One line naming what limits this configuration."""
    if r.workers == 0:
        return (
            f"decode-bound, in-process: the consumer's own thread produces every step ({r.steps_per_s:.0f} steps/s, "
            f"waits {r.wait_p50_ms:.0f} ms p50); workers help when cores are free"
        )
    uneven = imbalance(r)
    if uneven is not None:
        return uneven
    busy = _pct(r.busy)
    if r.busy != r.busy:  # NaN: the timed run was shorter than the loader's load sampling
        if r.wait_p50_ms < 1.0:
            return (
                f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50), workers - busy "
                "(load unknown: not measured in so short a run; use more --batches)"
            )
        return (
            f"unknown: worker load not measured (run more --batches); the consumer waits {r.wait_p50_ms:.1f} ms (p50)"
        )
    if r.busy >= 0.8 and r.wait_p50_ms >= 1.0:
        return f"decode-bound: workers {busy} busy, consumer waits {r.wait_p50_ms:.0f} ms (p50)"
    if r.wait_p50_ms < 1.0:
        return f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50), workers {busy} busy"
    return f"hand-off-bound: workers {busy} busy but the consumer waits {r.wait_p50_ms:.1f} ms (p50)"


# ----------------------------------------------------------------------------------------------------------
# Baseline: a plain torch DataLoader.


class _Row:
    """One row's open stream: its iterator and, for a block source, the unread part of its current block."""

    def __init__(self, source: StreamSource, item: Any) -> None:
        self.it = iter(source.open(item, 0))
        self.blocks = uses_blocks(source)  # steps come as (n, ...) blocks
        self.block: dict[str, np.ndarray] | None = None
        self.off = 0

    def fill(self, out: dict[str, np.ndarray], r: int) -> tuple[int, bool]:
        """Copy up to T steps into row ``r`` of ``out`` (zeros after the end); return (count, ended)."""
        t_len = len(next(iter(out.values())))
        t = 0
        while t < t_len:
            if self.block is None:
                step = next(self.it, None)
                if step is None:
                    for a in out.values():
                        a[t:, r] = 0
                    return t, True
                if not self.blocks:
                    for k, a in out.items():
                        a[t, r] = step[k]
                    t += 1
                    continue
                self.block, self.off = {k: np.asarray(v) for k, v in step.items()}, 0
            n_block = len(next(iter(self.block.values())))
            n = min(t_len - t, n_block - self.off)
            for k, a in out.items():
                a[t : t + n, r] = self.block[k][self.off : self.off + n]
            t, self.off = t + n, self.off + n
            if self.off >= n_block:
                self.block = None
        return t, False


class _RowsData:
    """Worker ``w`` of ``W`` owns rows ``bounds[w]`` and the items ``order[w::W]``; yields ``(w, chunks, valid)``.

    A row continues its stream; when the stream ends mid-chunk the rest is padding and the row takes the next
    item at the next chunk (boundary "pad").
    """

    def __init__(
        self, source: StreamSource, fields: Sequence[Field], order: Sequence[int], bounds: Sequence[int], t: int
    ) -> None:
        self.source, self.fields, self.order, self.bounds, self.t = source, fields, order, bounds, t

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any], int]]:
        import torch
        import torch.utils.data as tud

        info = tud.get_worker_info()
        w, n_w = (info.id, info.num_workers) if info is not None else (0, 1)
        if info is not None:
            call_setup_worker(self.source)  # part of the source contract (e.g. thread limits): the baseline too
        items = list(self.source.items())
        queue = iter([items[i] for i in self.order[w::n_w]])
        n_rows = self.bounds[w + 1] - self.bounds[w]
        rows: list[_Row | None] = [None] * n_rows
        while n_rows:
            chunks: dict[str, Any] = {}
            arrays: dict[str, np.ndarray] = {}
            for f in self.fields:
                shape = (self.t, n_rows, *f.shape)
                if info is not None:  # straight into shared memory, as default_collate does in a worker, so
                    # that sending it passes a file descriptor instead of copying it into shared memory first
                    nbytes = int(np.prod(shape)) * f.np_dtype.itemsize
                    storage = torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call]
                    chunks[f.name] = torch.empty(0, dtype=_torch_dtype(f)).set_(storage).view(shape)
                    arrays[f.name] = chunks[f.name].numpy()
                else:
                    arrays[f.name] = np.empty(shape, f.np_dtype)
                    chunks[f.name] = torch.from_numpy(arrays[f.name])
            valid = 0
            for r in range(n_rows):
                while True:
                    row = rows[r]
                    if row is None:
                        item = next(queue, None)
                        if item is None:
                            for a in arrays.values():
                                a[:, r] = 0
                            break
                        row = rows[r] = _Row(self.source, item)
                    n, ended = row.fill(arrays, r)
                    if ended:
                        rows[r] = None
                    if n:
                        valid += n
                        break
            if not valid:
                return
            yield w, chunks, valid


class TorchBaseline:
    """``DataLoader(rows dataset, batch_size=None, num_workers=W)``; the main process concatenates the W chunks.

    Yields ``{field: (T, B, ...) tensor}`` with boundary "pad" and epoch end "pad", like ``StreamLoader``'s
    defaults (no flags). The DataLoader returns worker outputs in strict round-robin order, so the W chunks of
    batch k arrive together; once a worker has run out of items its rows are zeros.
    """

    def __init__(
        self,
        source: StreamSource,
        batch_size: int,
        time_steps: int,
        num_workers: int = 0,
        *,
        seed: int = 0,
        shuffle: bool = True,
        mp_context: str | None = "spawn",
    ) -> None:
        import torch.utils.data as tud

        self.fields = list(source.fields())
        n = len(source.items())
        order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
        self.w = max(1, min(num_workers, batch_size))
        self.bounds = [batch_size * i // self.w for i in range(self.w + 1)]
        self.t = time_steps
        self._step_bytes = sum(f.nbytes for f in self.fields)
        self._batches = self._steps = 0
        self._t0 = time.perf_counter()
        dataset = __getattr__("RowsDataset")(source, self.fields, [int(i) for i in order], self.bounds, time_steps)
        workers = min(num_workers, batch_size)
        self.dl: Any = tud.DataLoader(
            dataset,
            batch_size=None,
            num_workers=workers,
            multiprocessing_context=mp_context if workers else None,
            persistent_workers=workers > 0,
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import torch

        pending: list[deque[tuple[dict[str, Any], int]]] = [deque() for _ in range(self.w)]
        done = [False] * self.w

        def ready() -> bool:
            return all(done[i] or pending[i] for i in range(self.w)) and any(pending)

        def pop() -> dict[str, Any]:
            parts = [q.popleft() if q else None for q in pending]
            self._batches += 1
            self._steps += sum(p[1] for p in parts if p is not None)
            if self.w == 1 and parts[0] is not None:
                return parts[0][0]
            out = {}
            for f in self.fields:
                chunks = []
                for i, p in enumerate(parts):
                    if p is not None:
                        chunks.append(p[0][f.name])
                    else:
                        rows = self.bounds[i + 1] - self.bounds[i]
                        chunks.append(torch.zeros((self.t, rows, *f.shape), dtype=_torch_dtype(f)))
                out[f.name] = torch.cat(chunks, dim=1)
            return out

        for wid, chunks, valid in self.dl:
            pending[wid].append((chunks, valid))
            for i in range(self.w):  # round-robin: a worker skipped while another queued 2 has finished
                if not pending[i] and len(pending[wid]) > 1:
                    done[i] = True
            while ready():
                yield pop()
        done = [True] * self.w
        while ready():
            yield pop()

    @property
    def stats(self) -> LoaderStats:
        """The counters a ``DataLoader`` can give: batches, valid steps and bytes (worker load is unknown)."""
        b, t = self.bounds[-1], self.t
        return LoaderStats(
            batches=self._batches, steps=self._steps, bytes=self._batches * b * t * self._step_bytes,
            elapsed_s=time.perf_counter() - self._t0, first_batch_s=None, waits_s=(), worker_busy=(),
            worker_steps=(), ready_slots=0, num_slots=0, epoch=0, streams_done=0, streams_total=0, skipped=0,
            copies=0,
        )  # fmt: skip

    def close(self) -> None:
        self.dl = None  # the DataLoader's iterator shuts its workers down when collected
        gc.collect()


def _torch_dtype(f: Field) -> Any:
    import torch

    return torch.from_numpy(np.empty(0, f.np_dtype)).dtype


def run_baseline(
    source: StreamSource,
    batch_size: int,
    time_steps: int,
    workers: Sequence[int] = (0, 1, 2),
    *,
    batches: int = 100,
    warmup: int = 10,
    repeats: int = 3,
    seed: int = 0,
    shuffle: bool = True,
) -> list[BenchResult]:
    """Time ``TorchBaseline`` at the same sizes, through the same runner as ``run_benchmark``."""

    def make(w: int) -> TorchBaseline:
        return TorchBaseline(source, batch_size, time_steps, w, seed=seed, shuffle=shuffle)

    return run_benchmark(make, workers, batches=batches, warmup=warmup, repeats=repeats, name="torch DataLoader")


def __getattr__(name: str) -> Any:
    # The DataLoader needs an IterableDataset subclass, picklable by reference for spawn workers, but torch
    # must not be imported with this module; so the class is made on first access, here and in workers.
    if name == "RowsDataset":
        import torch.utils.data as tud

        cls = type("RowsDataset", (_RowsData, tud.IterableDataset), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
