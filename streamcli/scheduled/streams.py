"""An epoch's streams in ticket order: segments, the seeded shuffle, a rank's share, a re-plan, and the batch count.

A *stream* is what a ticket hands a row: ``(item, first step, open-ended)``. With ``segment=N`` an item of known
length L is cut into ceil(L / N) streams; one of unknown length is one open-ended stream whose segments follow on
its row (``RowPhase.FOLLOW``). With every length known, ranks share one schedule of ``world_size * batch_size`` rows
(rank ``r`` writes rows ``[r * B, (r + 1) * B)``), so the global batches are the same for every world size;
otherwise each rank deals itself a share of the streams and runs a schedule of its own ``B`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import count_batches
from streamcli.scheduled.cursor import RowPhase
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
        """``(n, 4)`` int64 rows of (item, start, open-ended, the item's promised length or -1): the ring's order
        table."""
        promised = np.fromiter((-1 if n is None else n for n in lengths), np.int64, len(lengths))
        expect = promised[self.items] if len(self.items) else np.zeros(0, np.int64)
        return np.stack([self.items, self.starts, self.open_ended.astype(np.int64), expect], axis=1)

    def subset(self, idx: np.ndarray) -> Streams:
        return Streams(
            self.items[idx], self.starts[idx], self.open_ended[idx], None if self.lengths is None else self.lengths[idx]
        )


def all_streams(lengths: Sequence[int | None], segment: int, order: StreamOrder | None = None) -> Streams:
    """Every item's streams in item order, before shuffling (numpy: a million items)."""
    n = len(lengths)
    known = all(x is not None for x in lengths)
    plen = np.fromiter((-1 if x is None else x for x in lengths), np.int64, n)
    if not segment:  # one stream per item, from its first step
        whole = np.arange(n, dtype=np.int64)
        return Streams(whole, np.zeros(n, np.int64), np.zeros(n, bool), plen if known else None, order)
    has = plen >= 0
    counts = np.where(has, np.maximum(1, -(-plen // segment)), 1)  # (an empty item stays one empty stream)
    items = np.repeat(np.arange(n, dtype=np.int64), counts)
    first = np.cumsum(counts) - counts  # each item's first stream
    starts = (np.arange(len(items), dtype=np.int64) - first[items]) * segment
    cut = has[items]
    steps = np.where(cut, np.minimum(segment, plen[items] - starts), -1) if known else None
    return Streams(items, starts, ~cut, steps, order)


def shuffled(s: Streams, seed: int, epoch: int, shuffle: bool) -> Streams:
    """The epoch's ticket order: ``default_rng([seed, epoch]).permutation``, or the source's ``stream_order`` hook
    (which also decides for ``shuffle=False``)."""
    if s.order is not None:
        return s.subset(np.asarray(s.order(s.items, s.lengths, seed, epoch, shuffle), np.int64))
    if not shuffle:
        return s
    return s.subset(np.random.default_rng([seed, epoch]).permutation(len(s)))


def rank_of_streams(s: Streams, world_size: int) -> np.ndarray:
    """Each stream's rank: the least loaded so far (by steps), ties to the lowest; round-robin when lengths are
    unknown."""
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
    return s.subset(np.nonzero(rank_of_streams(s, world_size) == rank)[0])


@dataclass(frozen=True)
class Replan:
    """The rest of an epoch re-planned for another global batch (a state saved with ``G`` rows loaded on ``G'``):
    epoch ``epoch`` goes on from batch ``batch`` with the ``streams`` in flight as ``[item, first step]``, each a
    stream of its own, then the epoch's own streams from ticket ``tickets`` on; every step is delivered once."""

    epoch: int
    batch: int
    tickets: int
    streams: tuple[tuple[int, int], ...]

    def to_json(self) -> dict[str, Any]:
        streams = [list(s) for s in self.streams]
        return {"epoch": self.epoch, "batch": self.batch, "tickets": self.tickets, "streams": streams}

    @classmethod
    def of_json(cls, data: Any, num_items: int) -> Replan:
        """A saved re-plan, checked (``StateError`` naming what is wrong)."""
        keys = ("epoch", "batch", "tickets", "streams")
        if not isinstance(data, Mapping) or any(k not in data for k in keys):
            raise StateError(f"the state's replan={data!r} must hold {', '.join(keys)}; pass an unmodified state")
        ints = [data[k] for k in keys[:3]]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in ints):
            raise StateError(f"the state's replan {ints!r} must be integers >= 0; pass an unmodified state")
        streams = data["streams"]
        ok = isinstance(streams, (list, tuple)) and all(
            isinstance(s, (list, tuple)) and len(s) == 2 and all(type(v) is int for v in s) for s in streams
        )
        if not ok or any(not 0 <= s[0] < num_items or s[1] < 0 for s in streams):
            raise StateError(f"the state's replan streams must be [item, step] pairs of the {num_items} items")
        return cls(int(ints[0]), int(ints[1]), int(ints[2]), tuple((int(a), int(b)) for a, b in streams))

    def apply(self, own: Streams, lengths: Sequence[int | None], segment: int) -> Streams:
        """The re-planned epoch's streams in ticket order; ``own``: the epoch's streams as planned at its start."""
        assert own.lengths is not None
        cont = np.asarray(self.streams, np.int64).reshape(-1, 2)
        items, starts = cont[:, 0], cont[:, 1]
        promised = np.asarray([-1 if lengths[i] is None else lengths[i] for i in items.tolist()], np.int64)
        ends = np.minimum((starts // segment + 1) * segment, promised) if segment else promised
        rest = slice(min(self.tickets, len(own)), None)
        return Streams(
            np.concatenate([items, own.items[rest]]),
            np.concatenate([starts, own.starts[rest]]),
            np.concatenate([np.zeros(len(cont), bool), own.open_ended[rest]]),
            np.concatenate([np.maximum(ends - starts, 0), own.lengths[rest]]),
        )


def replan(cursors: np.ndarray, *, epoch: int, batch: int, tickets: int, before: Replan | None) -> Replan:
    """The re-plan of epoch ``epoch`` from a state at ``batch`` whose rows stand at ``cursors`` after ``tickets``
    tickets; ``before``: the re-plan that state's epoch already followed (its streams come first)."""
    state, flags = cursors[:, _cursor.STATE], cursors[:, _cursor.FLAGS]
    live = (state == RowPhase.LIVE) & (flags & _cursor.REPLAYED == 0)  # a replay is no step owed
    flying = [(int(i), int(p)) for i, p in cursors[live][:, [_cursor.ITEM, _cursor.POS]].tolist()]
    if before is None or before.epoch != epoch:
        return Replan(epoch, batch, tickets, tuple(flying))
    taken = len(before.streams)  # (the re-planned order: its continued streams, then the epoch's own)
    pending = before.streams[min(tickets, taken) :]
    return Replan(epoch, batch, before.tickets + max(0, tickets - taken), (*flying, *pending))


class Epochs:
    """The epochs of ``n_items`` items under ``config``; ``measure()`` asks the source for every item's length, once,
    when needed."""

    def __init__(
        self,
        config: LoaderConfig,
        n_items: int,
        measure: Callable[[], list[int | None]],
        plugin: str,
        order: StreamOrder | None = None,
    ) -> None:
        self.config, self.plugin = config, plugin
        self._measure = measure
        self._lengths: list[int | None] | None = None
        assert config.world_size is not None and config.rank is not None
        needs_lengths = bool(config.segment) or config.world_size > 1
        self.all = all_streams(self.lengths() if needs_lengths else [None] * n_items, config.segment, order)
        if config.world_size > 1 and self.all.lengths is None and config.batches_per_epoch is None:
            raise ValueError(
                f"world_size={config.world_size} needs every stream's length so that all ranks yield the same "
                f"number of batches, but source {plugin!r} does not report them all; make it report lengths (for "
                "video: scan=True, or an index: `streamcli index`) or pass batches_per_epoch=N"
            )
        # One global schedule for all ranks (``rows`` rows, this rank's from ``offset``), or a per-rank deal.
        self.shared = config.world_size == 1 or self.all.lengths is not None
        self.rows = config.batch_size * (config.world_size if self.shared else 1)
        self.offset = config.batch_size * config.rank if self.shared else 0
        self.replan: Replan | None = None  # a loaded state's re-plan of its epoch (another global batch)

    def lengths(self) -> list[int | None]:
        """Every item's length, as ``length()`` reports it (None: unknown)."""
        if self._lengths is None:
            self._lengths = self._measure()
        return self._lengths

    @property
    def measured(self) -> bool:
        return self._lengths is not None

    @property
    def known(self) -> bool:
        """Whether every item's length is known (measured now if it was not yet)."""
        return None not in self.lengths()

    def replanned(self, epoch: int) -> Replan | None:
        return self.replan if self.replan is not None and self.replan.epoch == epoch else None

    def balanceable(self, epoch: int) -> bool:
        """Whether rows may move between producers in ``epoch``: only on one rank's schedule, not re-planned."""
        return self.config.world_size == 1 and self.replanned(epoch) is None

    def streams(self, epoch: int) -> Streams:
        """The streams of ``epoch`` in ticket order (this rank's share where ranks deal them out)."""
        c = self.config
        assert c.rank is not None and c.world_size is not None
        if not self.shared:
            return epoch_streams(
                self.all, seed=c.seed, epoch=epoch, shuffle=c.shuffle, rank=c.rank, world_size=c.world_size
            )
        again = self.replanned(epoch)
        if again is None:
            return shuffled(self.all, c.seed, epoch, c.shuffle)
        return again.apply(shuffled(self._measured_all(), c.seed, epoch, c.shuffle), self.lengths(), c.segment)

    def _measured_all(self) -> Streams:
        """Every stream with its length (``TypeError`` if some are unknown)."""
        if self.all.lengths is not None:
            return self.all
        if any(n is None for n in self.lengths()):
            raise TypeError(
                f"len() needs every stream's length, but source {self.plugin!r} does not report them all; pass "
                "batches_per_epoch=N to fix the epoch's length, or make the source report lengths (for video: "
                "scan=True)"
            )
        return all_streams(self.lengths(), self.config.segment, self.all.order)

    def target(self, epoch: int) -> int | None:
        """The batches every epoch must yield: fixed by the user, or equal on every rank; None: natural end."""
        c = self.config
        if c.batches_per_epoch is not None:
            return c.batches_per_epoch
        assert c.world_size is not None
        if c.world_size == 1:
            return None
        assert self.shared, "ranks that deal their own streams need batches_per_epoch (``__init__``)"
        return self.batches(epoch)  # (one schedule: every rank ends with it)

    def batches(self, epoch: int, replan: Replan | None = None) -> int:
        """The batches epoch ``epoch`` yields (``TypeError`` if that needs lengths the source does not report);
        ``replan``: a loaded state's, which its epoch will follow."""
        c = self.config
        if c.batches_per_epoch is not None or not self.shared:
            target = self.target(epoch)
            assert target is not None
            return target
        again = replan if replan is not None and replan.epoch == epoch else self.replanned(epoch)
        s = shuffled(self._measured_all(), c.seed, epoch, c.shuffle)
        if again is not None:
            s = again.apply(s, self.lengths(), c.segment)
        assert s.lengths is not None
        n = count_batches(s.lengths.tolist(), self.rows, c.time_steps, c.boundary, c.epoch_end)
        return n + (again.batch if again is not None else 0)
