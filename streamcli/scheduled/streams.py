"""An epoch's streams, in ticket order: segments, the seeded shuffle and, where ranks deal them, this rank's share.

A *stream* is what a ticket hands a row: ``(item, first step, open-ended)``. With ``segment=N`` an item of known
length L is cut into ceil(L / N) streams; one of unknown length is one open-ended stream whose segments follow on
its row (``RowPhase.FOLLOW``). Where ranks deal the streams, every rank computes the same split
(``rank_of_streams``). A source's ``stream_order`` hook replaces the seeded permutation (``streamcli.mix``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from streamcli.scheduled.claims import count_batches
from streamcli.source import StreamOrder


@dataclass(frozen=True)
class Streams:
    """One rank's streams of one epoch, in ticket order; ``lengths`` is None if any is unknown."""

    items: np.ndarray  # int64
    starts: np.ndarray  # int64, the first step within the item
    open_ended: np.ndarray  # bool: length unknown, segments follow on the same row
    lengths: np.ndarray | None  # int64 steps of each stream
    order: StreamOrder | None = field(default=None, compare=False)  # the source's ``stream_order`` hook

    def __len__(self) -> int:
        return len(self.items)

    def table(self, lengths: Sequence[int | None]) -> np.ndarray:
        """``(n, 4)`` int64 rows of (item, start, open-ended, the item's promised length or -1) for the ring's
        order table; producers check a stream against the length its item promised."""
        promised = np.fromiter((-1 if n is None else n for n in lengths), np.int64, len(lengths))
        expect = promised[self.items] if len(self.items) else np.zeros(0, np.int64)
        return np.stack([self.items, self.starts, self.open_ended.astype(np.int64), expect], axis=1)


def all_streams(lengths: Sequence[int | None], segment: int, order: StreamOrder | None = None) -> Streams:
    """Every item's streams in item order, before shuffling; ``order``: the source's ``stream_order`` hook (numpy, not
    lists: at a million items lists would take several times the memory)."""
    n = len(lengths)
    known = all(x is not None for x in lengths)
    plen = np.fromiter((-1 if x is None else x for x in lengths), np.int64, n)
    if not segment:  # one stream per item, from its first step
        whole = np.arange(n, dtype=np.int64)
        return Streams(whole, np.zeros(n, np.int64), np.zeros(n, bool), plen if known else None, order)
    has = plen >= 0
    # (an empty item stays one empty stream)
    counts = np.where(has, np.maximum(1, -(-plen // segment)), 1)
    items = np.repeat(np.arange(n, dtype=np.int64), counts)
    first = np.cumsum(counts) - counts  # each item's first stream
    starts = (np.arange(len(items), dtype=np.int64) - first[items]) * segment
    cut = has[items]
    return Streams(
        items,
        starts,
        ~cut,
        np.where(cut, np.minimum(segment, plen[items] - starts), -1) if known else None,
        order,
    )


def _subset(s: Streams, idx: np.ndarray) -> Streams:
    return Streams(s.items[idx], s.starts[idx], s.open_ended[idx], None if s.lengths is None else s.lengths[idx])


def shuffled(s: Streams, seed: int, epoch: int, shuffle: bool) -> Streams:
    """The epoch's ticket order: ``default_rng([seed, epoch]).permutation`` of the streams, or the order of the
    source's ``stream_order`` hook (which also decides for ``shuffle=False``)."""
    if s.order is not None:
        idx = np.asarray(s.order(s.items, s.lengths, seed, epoch, shuffle), np.int64)
        return _subset(s, idx)
    if not shuffle:
        return s
    return _subset(s, np.random.default_rng([seed, epoch]).permutation(len(s)))


def rank_of_streams(s: Streams, world_size: int) -> np.ndarray:
    """The rank of each stream of a shuffled epoch: the least loaded so far (by steps), ties to the lowest rank;
    round-robin when lengths are unknown."""
    if world_size == 1:
        return np.zeros(len(s), np.int64)
    if s.lengths is None:
        return np.arange(len(s), dtype=np.int64) % world_size
    load = [0] * world_size
    out = np.empty(len(s), np.int64)
    for j, n in enumerate(s.lengths.tolist()):
        r = min(range(world_size), key=lambda q: (load[q], q))
        out[j] = r
        load[r] += n
    return out


def epoch_streams(
    base: Streams, *, seed: int, epoch: int, shuffle: bool, rank: int = 0, world_size: int = 1
) -> Streams:
    """This rank's streams of ``epoch``, in ticket order."""
    s = shuffled(base, seed, epoch, shuffle)
    if world_size == 1:
        return s
    return _subset(s, np.nonzero(rank_of_streams(s, world_size) == rank)[0])


def rank_batches(
    base: Streams,
    *,
    seed: int,
    epoch: int,
    shuffle: bool,
    world_size: int,
    batch_size: int,
    time_steps: int,
    boundary: str,
    epoch_end: str,
) -> list[int]:
    """The natural number of batches of every rank in ``epoch`` (needs known lengths)."""
    s = shuffled(base, seed, epoch, shuffle)
    assert s.lengths is not None
    ranks = rank_of_streams(s, world_size)
    return [
        count_batches(s.lengths[ranks == r].tolist(), batch_size, time_steps, boundary, epoch_end)
        for r in range(world_size)
    ]
