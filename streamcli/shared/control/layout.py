"""The control block's layout: its arrays (``arrays``), in the segment before the batch slots (``shared.ring``), and
the named views through which ``Control`` reads them, and the row table an epoch starts from (``epoch_rows``). Only
``Control`` uses the views; the memory layout (offsets, shapes, dtypes) is ``arrays``'s alone.

- ``ctl`` int64[16]: the single values, by name (``ControlValues``);
- ``slot_of`` int64[S]: the slot of batch k, at ``k % S``;
- ``rows`` int64[B, 3]: per row, its owner, next claim and batches completed, by column (``RowTable``);
- ``held`` int64[B, 4]: the cursor of a row handed over between producers;
- ``wstat`` float64[W, 5]: per producer, its counters, by column (``WorkerStats``);
- ``order`` int64[N, 4]: this epoch's streams in ticket order, as (item, first step, open-ended, promised
  length); a segment is a stream of its own (``scheduled.streams``);
- ``start`` int64[G, 4]: the row cursors an epoch starts from, fresh or those of a resumed state: the global
  batch's ``G`` rows where ranks share one schedule (``scheduled.streams``), else the ``B`` rows of this loader;
- ``mark`` int64[W, 3]: per producer, the stream and step it is reading right now and the call it is in
  (``CALLS``), written before every call into the source that can block (an open, each step or block, a window):
  what a dead or stalled worker was doing, and the progress that ``timeout=`` measures;
- ``done`` int64[S]: ``k + 1`` at ``k % S`` once batch k is whole, where one producer fills it whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase

NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call

# The source's call a producer is in, as ``mark[w, 2]`` holds it.
READING, OPENING, WINDOWING = 0, 1, 2
CALLS = {READING: "next()", OPENING: "open()", WINDOWING: "window()"}


class Values:
    """A block of int64 values in shared memory, each read and written by name through an ``Int64`` of the
    subclass. Reading gives a Python int (a memoryview's item: no numpy scalar on the hot path)."""

    __slots__ = ("_items",)
    SIZE = 0  # the values a subclass names: the length of its array

    def __init__(self, array: np.ndarray) -> None:
        if array.shape != (self.SIZE,) or array.dtype != np.int64:
            raise ValueError(f"{type(self).__name__} needs int64[{self.SIZE}], not {array.dtype}{list(array.shape)}")
        # "q" is int64 on every platform; the view shares the array's memory (and keeps it alive).
        self._items = array.data.cast("B").cast("q")


class Int64:
    """One value of a ``Values`` block, at ``index``: ``block.name`` reads it, ``block.name = v`` writes it (one
    aligned 8-byte store, as numpy's). An increment (``+=``) reads and then writes: hold the lock where two
    processes may increment the same value."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    @overload
    def __get__(self, block: None, owner: type[Values]) -> Int64: ...
    @overload
    def __get__(self, block: Values, owner: type[Values]) -> int: ...
    def __get__(self, block: Values | None, owner: type[Values]) -> int | Int64:
        if block is None:
            return self
        value: int = block._items[self.index]
        return value

    def __set__(self, block: Values, value: int) -> None:
        block._items[self.index] = value


class ControlValues(Values):
    """``ctl``: the control block's single values, each an int64 by name (its index is its place in ``ctl``)."""

    __slots__ = ()
    SIZE = 16
    generation = Int64(0)  # a new epoch, or closing (``CLOSING``): producers drop the work of an older one
    tickets = Int64(1)  # tickets taken this epoch (``take_ticket``)
    first_batch = Int64(2)  # the batch the epoch starts at
    num_streams = Int64(3)  # the epoch's streams in ``order``
    handed = Int64(4)  # batches handed out: batch k may be written once ``handed > k``
    ready = Int64(5)  # the generation whose tables are written (producers may start it)
    awaited = Int64(6)  # the batch the loader is blocked on (-1: none)
    spare = Int64(7)  # unused (it counted rows given up before one balancing protocol): the others keep their place
    moved = Int64(8)  # rows moved mid-stream since the loader started
    epoch = Int64(9)  # the epoch being produced (a transform's ``ctx.epoch``)
    balanced = Int64(10)  # 1 when the epoch's rows move to an idle producer (``fills.writers.Balanced``)
    start_rows = Int64(11)  # the schedule's rows: the global batch where ranks share one schedule, else B
    row_offset = Int64(12)  # this rank's first row in that schedule
    move_row = Int64(13)  # the row being handed over between producers (-1: none)
    move_to = Int64(14)  # the producer it goes to
    move_at = Int64(15)  # the batch from which that producer writes it


class WorkerStats:
    """``wstat``'s columns by name, one entry per producer (float64 views of the shared table), and the same
    memory as Python floats (``items``, producer ``w``'s column ``c`` at ``w * WIDTH + c``) for one value at a time:
    a producer writes its own after every batch, and a numpy scalar costs more than the write."""

    WIDTH = 5
    BUSY, STEPS, IDLE, SENT, LOAD = range(WIDTH)

    def __init__(self, wstat: np.ndarray) -> None:
        self.busy = wstat[:, self.BUSY]  # seconds spent producing
        self.steps = wstat[:, self.STEPS]  # steps read
        self.idle = wstat[:, self.IDLE]  # 1 while it has nothing to do
        self.sent = wstat[:, self.SENT]  # messages it has sent over its pipe
        self.load = wstat[:, self.LOAD]  # seconds its rows took in their last timed batch (``fills.balanced``)
        self.items = wstat.data.cast("B").cast("d") if wstat.size else memoryview(b"").cast("d")


class RowTable:
    """``rows``'s columns by name, one entry per batch row (int64 views of the shared table)."""

    WIDTH = 3

    def __init__(self, rows: np.ndarray) -> None:
        self.owner = rows[:, 0]  # the producer that writes it
        self.claim = rows[:, 1]  # the canonical key of its next possible claim (``NEVER``: none this epoch)
        self.written = rows[:, 2]  # the batches it has completed


def arrays(
    batch_size: int, num_slots: int, num_workers: int, num_streams: int, global_rows: int = 0
) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    """The control block's arrays as (name, shape, dtype), in the order ``Control`` takes them; ``global_rows``:
    the global batch's rows (0: ``batch_size``)."""
    B = batch_size
    return (
        ("ctl", (ControlValues.SIZE,), "<i8"),
        ("slot_of", (num_slots,), "<i8"),
        ("rows", (B, RowTable.WIDTH), "<i8"),
        ("held", (B, _cursor.WIDTH), "<i8"),
        ("wstat", (num_workers, WorkerStats.WIDTH), "<f8"),
        ("order", (num_streams, 4), "<i8"),
        ("start", (max(B, global_rows), _cursor.WIDTH), "<i8"),
        ("mark", (num_workers, 3), "<i8"),
        ("done", (num_slots,), "<i8"),
    )


def epoch_rows(cursors: np.ndarray, first: int, T: int, bounds: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """The shared row table an epoch starts from (owner, claim key, batches written, held cursor): each row belongs
    to the producer of its block (``bounds``), which reopens its stream."""
    B = len(cursors)
    state = cursors[:, _cursor.STATE]
    owner = np.zeros(B, np.int64)
    for w, (lo, hi) in enumerate(bounds):
        owner[lo:hi] = w
    claim = first * T * B + np.arange(B, dtype=np.int64)
    claim[state == RowPhase.DRY] = NEVER
    return owner, claim, np.full(B, first, np.int64), cursors.copy()
