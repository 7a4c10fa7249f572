"""The benchmark's workload: synthetic frame streams with a chosen CPU cost per frame and per open.

Every loader in the benchmark (streamcli and the peers) reads the same ``SyntheticFrames`` source through
``open(item, start)``, so they all pay the same per-frame and per-open costs.

Each step is one ``(3, 64, 64)`` uint8 frame, all zeros except its first 8 bytes: ``int32(item + 1)`` and
``int32(position)``. ``decode_stamps`` reads them back from a batch, so coherence (row ``b`` continues the
same stream) and completeness (every stream delivered once, whole) can be checked for any loader, even those
that carry no flags. Padding is all zeros and decodes as item ``-1``.

The class lives in its own importable module because spawn workers unpickle it by module name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
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
        span = self.max_len - self.min_len + 1
        return self.min_len + _mix(int(item) * 1_000_003 + self.seed) % span

    def total_steps(self) -> int:
        return sum(self.length(i) for i in range(self.n_items))

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, npt.NDArray[np.uint8]]]:
        item = int(item)
        n = self.length(item)
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


def write_chunk(steps: Iterator[dict[str, npt.NDArray[np.uint8]]], out: npt.NDArray[np.uint8]) -> tuple[int, bool]:
    """Copy up to ``len(out)`` frames from ``steps`` into ``out`` (zero the rest); return (count, ended)."""
    for n in range(len(out)):
        step = next(steps, None)
        if step is None:
            out[n:] = 0
            return n, True
        out[n] = step["frame"]
    return len(out), False


class RowFeeder:
    """Fills ``(T, rows, ...)`` chunks for a group of rows from a queue of items (boundary "pad").

    A row continues its stream; when the stream ends mid-chunk the rest of the chunk is padding and the
    row takes the next item at the next chunk. This is what a careful user of a plain ``DataLoader`` writes.
    """

    def __init__(self, source: SyntheticFrames, items: Sequence[int], rows: int) -> None:
        self.source = source
        self.queue = iter(items)
        self.its: list[Iterator[dict[str, npt.NDArray[np.uint8]]] | None] = [None] * rows

    def fill(self, out: npt.NDArray[np.uint8]) -> bool:
        """Fill ``out`` of shape ``(T, rows, 3, 64, 64)``; False once every row has run dry (all padding)."""
        any_valid = False
        for r in range(len(self.its)):
            while True:
                it = self.its[r]
                if it is None:
                    nxt = next(self.queue, None)
                    if nxt is None:
                        out[:, r] = 0
                        break
                    it = self.its[r] = self.source.open(nxt)
                n, ended = write_chunk(it, out[:, r])
                if ended:
                    self.its[r] = None
                if n > 0:
                    any_valid = True
                    break
        return any_valid


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
