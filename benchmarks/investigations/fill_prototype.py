"""Prototype of the second engine's fill step (ENGINE2_DESIGN.md): row state in arrays, a batch filled with a few
numpy operations per run of steps and one slice copy per (row, run), from random-access items.

    python benchmarks/investigations/fill_prototype.py          # text (a) and null (c) shapes, ~10 s

Rows whose current stream covers the whole batch (the common case) get their flags from whole-array operations
and their data from one slice copy each; only rows that cross a stream's end take the per-run path. The
prototype follows the hand loop's schedule exactly (same seeded order, ``boundary="pack"``), checks that its
batches equal the hand loop's, then times both in interleaved rounds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import bench_small_steps as bench

I64 = npt.NDArray[np.int64]


class Filler:
    """B rows over a seeded shuffle of ``spans`` (item, start, end) of ``items`` (array-likes of steps, read by
    ``(position, n)`` windows). State: ``item``, ``pos``, ``end``, ``span`` per row, and the schedule cursor."""

    def __init__(self, items: Sequence[np.ndarray], spans: I64, B: int, T: int, seed: int = 0) -> None:
        self.items, self.spans, self.B, self.T = items, spans, B, T
        self.rng = np.random.default_rng(seed)
        self.order: I64 = self.rng.permutation(len(spans))  # same draws as bench.HandLoop
        self.next = 0
        self.item = np.zeros(B, np.int64)
        self.pos = np.zeros(B, np.int64)
        self.end = np.zeros(B, np.int64)
        self.span = np.full(B, -1, np.int64)  # the stream (schedule entry) each row holds
        self.start = np.zeros(B, np.int64)
        self.steps: I64 = np.arange(T, dtype=np.int64)[:, None]
        step = items[0].shape[1:]
        self.out = np.zeros((T, B, *step), items[0].dtype)
        self.valid = np.zeros((T, B), bool)
        self.is_first = np.zeros((T, B), bool)
        self.stream = np.zeros((T, B), np.int64)
        self.position = np.zeros((T, B), np.int64)

    def _take(self, b: int) -> None:
        """Row ``b`` takes the next stream of the schedule."""
        if self.next == len(self.order):
            self.order, self.next = self.rng.permutation(len(self.spans)), 0
        s = int(self.order[self.next])
        self.next += 1
        a, lo, hi = self.spans[s]
        self.item[b], self.pos[b], self.end[b], self.start[b], self.span[b] = a, lo, hi, lo, s

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        T, out, items = self.T, self.out, self.items
        # Flags for every row as if its stream covered the batch: whole-array operations, no fancy indexing.
        # The rows that cross a stream's end overwrite their columns below.
        self.valid.fill(True)
        self.is_first.fill(False)
        np.equal(self.pos, self.start, out=self.is_first[0])
        np.copyto(self.stream, self.span)
        np.add(self.steps, self.pos, out=self.position)
        cross = self.end - self.pos < T
        if not cross.any():
            for b, (a, p) in enumerate(zip(self.item.tolist(), self.pos.tolist(), strict=True)):
                out[:, b] = items[a][p : p + T]  # one slice copy per row
            self.pos += T
            return out
        whole = np.flatnonzero(~cross)
        for b, a, p in zip(whole.tolist(), self.item[whole].tolist(), self.pos[whole].tolist(), strict=True):
            out[:, b] = items[a][p : p + T]
        self.pos[whole] += T
        for b in np.flatnonzero(cross).tolist():  # rows that cross a stream's end: run by run
            t = 0
            while t < T:
                if self.pos[b] >= self.end[b]:
                    self._take(b)
                    self.is_first[t, b] = True
                else:
                    self.is_first[t, b] = False
                p, n = int(self.pos[b]), min(T - t, int(self.end[b] - self.pos[b]))
                out[t : t + n, b] = items[int(self.item[b])][p : p + n]
                self.stream[t : t + n, b] = self.span[b]
                self.position[t : t + n, b] = p + self.steps[:n, 0]
                self.pos[b] = p + n
                t += n
        return out


def check(items: Sequence[np.ndarray], spans: I64, B: int, T: int, batches: int) -> None:
    """The prototype's batches equal the hand loop's (data, valid, is_first)."""
    hand, fill = bench.HandLoop(items, spans, B, T), Filler(items, spans, B, T)
    for k in range(batches):
        a, b = next(hand), next(fill)
        if not (np.array_equal(a, b) and np.array_equal(hand.valid, fill.valid)
                and np.array_equal(hand.is_first, fill.is_first)):  # fmt: skip
            raise SystemExit(f"batch {k}: the prototype differs from the hand loop")


def compare(name: str, items: Sequence[np.ndarray], spans: I64, B: int, T: int, batches: int = 60) -> str:
    check(items, spans, B, T, 5)
    rates: dict[str, list[float]] = {"hand": [], "fill": []}
    for r in range(7):
        for key in ("hand", "fill")[:: -1 if r % 2 else 1]:
            loop = bench.HandLoop(items, spans, B, T) if key == "hand" else Filler(items, spans, B, T)
            rates[key].append(bench.timed(loop, 3, batches))
    ratio = statistics.median(h / f for h, f in zip(rates["hand"], rates["fill"], strict=True))
    us = {k: statistics.median(v) * 1e6 / B for k, v in rates.items()}
    return f"| {name} | {B} | {T} | {us['hand']:.2f} | {us['fill']:.2f} | {ratio:.2f}x |"


def main() -> None:
    print("| workload | B | T | hand loop µs/row/batch | prototype fill µs/row/batch | prototype speed vs hand |")
    print("|---|---:|---:|---:|---:|---:|")
    files = bench.text_files(bench.TEXT_FOLDERS)
    with tempfile.TemporaryDirectory(prefix="fill_prototype_") as tmp:
        corpus = bench.text_corpus(files, 8 << 20, Path(tmp))
        maps, spans = bench.text_spans(sorted(str(p) for p in corpus.iterdir()), bench.TEXT_SEGMENT)
        views = [np.asarray(m) for m in maps]
        print(compare("text, ndarray views of the maps", views, spans, bench.TEXT_B, bench.TEXT_T), flush=True)
        print(compare("text, np.memmap slices", maps, spans, bench.TEXT_B, bench.TEXT_T), flush=True)
    null = [np.zeros((1 << 20, 1), np.uint8)]
    for B in bench.NULL_BS:
        spans = np.asarray([(0, i * 4096, (i + 1) * 4096) for i in range(256)], np.int64)
        print(compare(f"null, 4096-step streams, T={bench.NULL_T}", null, spans, B, bench.NULL_T), flush=True)


if __name__ == "__main__":
    main()
