"""The benchmark's workloads: synthetic frame streams with a chosen CPU cost per frame and per open.

Every loader in the benchmark (streamcli and the peers) reads the same source through ``open(item, start)``,
so they all pay the same per-frame and per-open costs. ``SyntheticFrames`` makes one frame per numpy call;
``ChunkedFrames`` makes 8 per call (as the peers' readers and real decoders do) and yields them one step at a
time; ``BlockFrames`` is the same source declaring ``block_steps = True``, yielding ``(n <= 8, 3, 64, 64)``
blocks. ``VARIANTS`` names the workloads the harness runs.

Each step is one ``(3, 64, 64)`` uint8 frame, all zeros except its first 8 bytes: ``int32(item + 1)`` and
``int32(position)``. ``decode_stamps`` reads them back from a batch, so coherence (row ``b`` continues the
same stream) and completeness (every stream delivered once, whole) can be checked for any loader, even those
that carry no flags. Padding is all zeros and decodes as item ``-1``.

The classes live in an importable module because spawn workers unpickle them by module name.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from streamcli import BaseSource, Field

FRAME_SHAPE = (3, 64, 64)
FRAME_BYTES = 3 * 64 * 64
_MASK64 = (1 << 64) - 1


def spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time (not wall time: a descheduled thread keeps burning)."""
    if seconds <= 0:
        return
    end = time.thread_time_ns() + int(seconds * 1e9)
    while time.thread_time_ns() < end:
        pass


def _mix(x: int) -> int:
    """splitmix64: a cheap deterministic hash, so lengths need no table (the source stays tiny at 10^5 items)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


class SyntheticFrames(BaseSource):
    """``n_items`` streams of ``min_len..max_len`` steps; ``frame_cost_s`` CPU per frame, ``open_cost_s`` per open."""

    def __init__(
        self,
        n_items: int = 64,
        min_len: int = 200,
        max_len: int = 2000,
        *,
        frame_cost_s: float = 0.0,
        open_cost_s: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not 1 <= min_len <= max_len:
            raise ValueError(f"need 1 <= {min_len=} <= {max_len=}")
        self.n_items = n_items
        self.min_len = min_len
        self.max_len = max_len
        self.frame_cost_s = frame_cost_s
        self.open_cost_s = open_cost_s
        self.seed = seed

    def items(self) -> Sequence[Any]:
        return range(self.n_items)

    def fields(self) -> Sequence[Field]:
        return [Field("frame", FRAME_SHAPE, "uint8")]

    def length(self, item: Any) -> int:
        return self.steps_of(item)

    def steps_of(self, item: Any) -> int:
        """The item's steps (what ``length`` tells the loader; a subclass may keep it to itself)."""
        span = self.max_len - self.min_len + 1
        return self.min_len + _mix(int(item) * 1_000_003 + self.seed) % span

    def total_steps(self) -> int:
        return sum(self.steps_of(i) for i in range(self.n_items))

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, npt.NDArray[np.uint8]]]:
        item = int(item)
        n = self.steps_of(item)
        spin(self.open_cost_s)
        cost = self.frame_cost_s
        for pos in range(start, n):
            if cost:
                spin(cost)
            frame = np.zeros(FRAME_SHAPE, np.uint8)
            stamp = frame.reshape(-1)[:8].view("<i4")
            stamp[0] = item + 1
            stamp[1] = pos
            yield {"frame": frame}

    def item_name(self, item: Any) -> str:
        return f"synthetic#{item}"


def fill_by_hand(src: SyntheticFrames, its: list[Any], queue: Iterator[Any], out: np.ndarray) -> None:
    """One batch ``out`` (T, B, ...) of frames the way a hand-written loop reads them: row ``b`` from ``its[b]``,
    which opens the next item of ``queue`` when its stream ends (the bare loop the loader is measured against)."""
    T, B = out.shape[:2]
    for b in range(B):
        for t in range(T):
            step = next(its[b], None)
            if step is None:
                its[b] = iter(src.open(next(queue)))
                step = next(its[b])
            out[t, b] = step["frame"]


class SkewedFrames(SyntheticFrames):
    """SyntheticFrames whose first ``heavy`` items cost ``heavy_factor`` times more per frame: a few expensive
    streams among cheap ones, as one slow-to-decode clip in a folder (``bench_balance.py``)."""

    def __init__(self, *args: Any, heavy: int = 3, heavy_factor: float = 20.0, sleep: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.heavy, self.heavy_factor, self.sleep = heavy, heavy_factor, sleep

    def step_cost(self, item: int) -> float:
        return self.frame_cost_s * (self.heavy_factor if item < self.heavy else 1.0)

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, npt.NDArray[np.uint8]]]:
        if self.sleep:  # steps that wait instead of computing: workers never compete for cores (scheduling alone)
            cost = self.step_cost(int(item))
            for step in SyntheticFrames(self.n_items, self.min_len, self.max_len, seed=self.seed).open(item, start):
                time.sleep(cost)
                yield step
            return
        extra = self.frame_cost_s * (self.heavy_factor - 1) if int(item) < self.heavy else 0.0
        for step in super().open(item, start):
            if extra:
                spin(extra)
            yield step


def scaling_figures(row_costs: Iterable[npt.NDArray[np.float64]], workers: int = 2) -> tuple[float, float]:
    """From each batch's cost per row (seconds), what ``workers`` producers could gain over one: (the lockstep
    figure, the row-chain bound). Lockstep: every batch takes at least its costliest row, or its rows' cost shared
    evenly (no producer runs ahead of the batch being assembled). Row chain: the epoch takes at least the costliest
    row's whole sequence of streams, and at least all the work shared evenly."""
    chains: npt.NDArray[np.float64] | None = None
    lockstep = 0.0
    for rows in row_costs:
        chains = rows.copy() if chains is None else chains + rows
        lockstep += max(rows.max(), rows.sum() / workers)
    if chains is None or not lockstep:
        return 1.0, 1.0
    total = chains.sum()
    return float(total / lockstep), float(total / max(chains.max(), total / workers))


def windowed_figure(row_costs: Iterable[npt.NDArray[np.float64]], window: int, workers: int = 2) -> float:
    """What ``workers`` producers could gain over one if they may write at most ``window`` batches ahead of the
    oldest one not yet whole (the loader's ``prefetch``). Every (batch, row) piece of work is scheduled, each
    row's pieces in order, to whichever producer is free, with rows moving between producers at every batch for
    free; the better of two greedy orders is kept (earliest batch first, and the row with the most work left
    first). Not a bound, since neither order is always optimal, but no real loader moves rows for free: it says
    how much of the row-chain bound a window of that depth leaves within reach."""
    costs = np.stack(list(row_costs)) if row_costs else np.zeros((0, 0))
    if not costs.size or not costs.sum():
        return 1.0
    return float(costs.sum() / min(_schedule(costs, window, workers, rank) for rank in ("batch", "chain")))


def _schedule(costs: npt.NDArray[np.float64], window: int, workers: int, rank: str) -> float:
    """The makespan of one greedy schedule for ``windowed_figure``."""
    K, B = costs.shape
    left_in_row = costs[::-1].cumsum(axis=0)[::-1]  # [k, r]: row r's work from batch k on
    nxt = [0] * B  # each row's next batch to do
    row_free = [0.0] * B  # when each row's last piece finished
    left = [int((costs[k] > 0).sum()) for k in range(K)]  # pieces of batch k not yet finished
    done_upto = 0  # batches 0 .. done_upto-1 are whole
    busy: list[tuple[float, int, int]] = []  # (finish, batch, row) of running pieces
    free_workers, now = workers, 0.0

    def skip_padding(r: int) -> None:  # pieces that cost nothing are done as soon as reached
        while nxt[r] < K and costs[nxt[r], r] == 0:
            nxt[r] += 1

    def settle() -> None:
        nonlocal done_upto
        while done_upto < K and left[done_upto] == 0:
            done_upto += 1

    for r in range(B):
        skip_padding(r)
    settle()
    while done_upto < K:
        running = {r for _, _, r in busy}
        ready = [r for r in range(B) if nxt[r] < K and r not in running and nxt[r] < done_upto + window]
        if rank == "batch":  # earliest batch first, its costliest piece first
            ready.sort(key=lambda r: (nxt[r], -costs[nxt[r], r]))
        else:  # the row with the most work left first
            ready.sort(key=lambda r: -left_in_row[nxt[r], r])
        for r in ready[:free_workers]:
            busy.append((max(now, row_free[r]) + float(costs[nxt[r], r]), nxt[r], r))
            free_workers -= 1
        busy.sort()
        now, k, r = busy.pop(0)
        free_workers += 1
        row_free[r] = now
        left[k] -= 1
        nxt[r] += 1
        skip_padding(r)
        settle()
    return now


class ChunkedFrames(SyntheticFrames):
    """``SyntheticFrames`` that makes its frames ``CHUNK`` at a time (one numpy call each) and yields single steps."""

    CHUNK = 8

    def chunks(self, item: Any, start: int = 0) -> Iterator[npt.NDArray[np.uint8]]:
        """``(n <= CHUNK, 3, 64, 64)`` stamped frames from step ``start`` on; the costs are paid per chunk."""
        item = int(item)
        n = self.length(item)
        spin(self.open_cost_s)
        for c0 in range(start, n, self.CHUNK):
            c1 = min(c0 + self.CHUNK, n)
            spin(self.frame_cost_s * (c1 - c0))
            block = np.zeros((c1 - c0, *FRAME_SHAPE), np.uint8)
            stamps = np.empty((c1 - c0, 2), "<i4")
            stamps[:, 0] = item + 1
            stamps[:, 1] = np.arange(c0, c1)
            block.reshape(c1 - c0, -1)[:, :8] = stamps.view(np.uint8).reshape(c1 - c0, 8)
            yield block

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, npt.NDArray[np.uint8]]]:
        for block in self.chunks(item, start):
            for frame in block:
                yield {"frame": frame}


class BlockFrames(ChunkedFrames):
    """``ChunkedFrames`` as a block source: each ``open`` yields ``{"frame": (n <= 8, 3, 64, 64)}`` blocks."""

    block_steps = True

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, npt.NDArray[np.uint8]]]:
        for block in self.chunks(item, start):
            yield {"frame": block}


@dataclass(frozen=True)
class Variant:
    """One workload of the harness: its source, sizes and what is run on it."""

    name: str
    title: str
    kind: type[SyntheticFrames]
    costs: dict[str, float] = field(default_factory=dict)  # frame_cost_s, open_cost_s
    workers: tuple[int, ...] = (1, 2)
    consumers: tuple[str, ...] = ("free", "sleep", "cpu")  # at 2 workers
    batches: int = 400  # timed batches per run (quick: a quarter)
    peers_from: str | None = None  # run streamcli only; compare with that variant's peers (same frames)
    needs_blocks: bool = False  # runs only where StreamLoader.supports_blocks

    def source(self, n_items: int = 64, min_len: int = 200, max_len: int = 2000) -> SyntheticFrames:
        frame, open_ = self.costs.get("frame_cost_s", 0.0), self.costs.get("open_cost_s", 0.0)
        return self.kind(n_items, min_len, max_len, frame_cost_s=frame, open_cost_s=open_)


VARIANTS = {
    v.name: v
    for v in (
        Variant("A", "frames cost nothing, one numpy call per frame", SyntheticFrames),
        Variant(
            "A8", "frames cost nothing, made 8 per numpy call, yielded one step at a time", ChunkedFrames,
            workers=(0, 1, 2),
        ),
        Variant(
            "A8b", "the A8 frames yielded as blocks of up to 8 steps (block_steps = True)", BlockFrames,
            workers=(0, 1, 2), peers_from="A8", needs_blocks=True,
        ),
        Variant(
            "B", "100 us CPU per frame, 2 ms CPU per stream open", SyntheticFrames,
            {"frame_cost_s": 100e-6, "open_cost_s": 2e-3}, consumers=("free", "sleep"), batches=120,
        ),
    )
}  # fmt: skip


def workload(variant: str, n_items: int = 64, min_len: int = 200, max_len: int = 2000) -> SyntheticFrames:
    """The source of ``variant`` (a name in ``VARIANTS``)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    return VARIANTS[variant].source(n_items, min_len, max_len)


def write_chunk(steps: Iterator[dict[str, npt.NDArray[np.uint8]]], out: npt.NDArray[np.uint8]) -> tuple[int, bool]:
    """Copy up to ``len(out)`` frames from ``steps`` into ``out`` (zero the rest); return (count, ended)."""
    for n in range(len(out)):
        step = next(steps, None)
        if step is None:
            out[n:] = 0
            return n, True
        out[n] = step["frame"]
    return len(out), False


def decode_stamps(frames: npt.NDArray[np.uint8]) -> npt.NDArray[np.int32]:
    """``(T, B, 3, 64, 64)`` uint8 -> ``(T, B, 2)`` int32 of (item, position); padding gives (-1, 0)."""
    t, b = frames.shape[:2]
    head = np.ascontiguousarray(frames.reshape(t, b, -1)[:, :, :8])
    out = head.view("<i4").astype(np.int32)
    out[:, :, 0] -= 1
    return out


class CoherenceCheck:
    """Feed it the stamps of consecutive batches; it records every way the stream contract is broken."""

    def __init__(self, source: SyntheticFrames, batch_size: int) -> None:
        self.source = source
        self.rows: list[tuple[int, int] | None] = [None] * batch_size  # (item, last position) per row
        self.seen: dict[int, int] = {}  # item -> steps delivered
        self.problems: list[str] = []
        self.batches = 0
        self.empty_batches = 0  # batches with no valid step at all
        self.valid_steps = 0
        self.order: list[int] = []  # items in the order their first step appeared

    def feed(self, stamps: npt.NDArray[np.int32]) -> None:
        t_len, b_len = stamps.shape[:2]
        self.empty_batches += bool((stamps[:, :, 0] < 0).all())
        for b in range(b_len):
            for t in range(t_len):
                item, pos = int(stamps[t, b, 0]), int(stamps[t, b, 1])
                if item < 0:
                    continue
                self.valid_steps += 1
                cur = self.rows[b]
                if pos == 0:
                    if cur is not None and cur[1] + 1 < self.source.length(cur[0]):
                        self._problem(f"row {b}: item {cur[0]} cut at step {cur[1] + 1} by item {item}")
                    if item in self.seen:
                        self._problem(f"row {b}: item {item} delivered again")
                    self.seen[item] = 0
                    self.order.append(item)
                elif cur is None or cur[0] != item or cur[1] + 1 != pos:
                    self._problem(f"row {b}: ({item}, {pos}) does not continue {cur}")
                self.seen[item] = self.seen.get(item, 0) + 1
                self.rows[b] = (item, pos)
        self.batches += 1

    def _problem(self, msg: str) -> None:
        if len(self.problems) < 1000:
            self.problems.append(f"batch {self.batches}: {msg}")

    def finish(self) -> list[str]:
        """Problems found, including streams missing or incomplete at the end of an epoch."""
        out = list(self.problems)
        missing = [i for i in range(self.source.n_items) if i not in self.seen]
        if missing:
            out.append(f"{len(missing)} of {self.source.n_items} items never delivered, e.g. {missing[:5]}")
        short = [i for i, n in self.seen.items() if n != self.source.length(i)]
        if short:
            i = short[0]
            out.append(
                f"{len(short)} items delivered with the wrong step count, e.g. item {i}: "
                f"{self.seen[i]} of {self.source.length(i)}"
            )
        return out
