"""The control block's layout: its arrays (``arrays``) and their columns, in the segment before the batch slots
(``shared.ring``), and the named views through which the classes of ``shared.control`` read them. Only those
classes use them; the memory layout (offsets, shapes, dtypes) is ``arrays``'s alone.

- ``ctl`` int64[11]: the single values, by name (``ControlValues``);
- ``slot_of`` int64[S]: the slot of batch k, at ``k % S``;
- ``rows`` int64[B, 3]: per row, its owner, next claim and batches completed, by column (``RowTable``);
- ``held`` int64[B, 4]: the cursor of a row between producers;
- ``wstat`` float64[W, 7]: per producer, its counters, by column (``WorkerStats``);
- ``order`` int64[N, 4]: this epoch's streams in ticket order, as (item, first step, open-ended, promised
  length); a segment is a stream of its own (``scheduled.streams``);
- ``start`` int64[G, 4]: the row cursors an epoch starts from, fresh or those of a resumed state: the global
  batch's ``G`` rows where ranks share one schedule (``scheduled.epochs``), else the ``B`` rows of this loader;
- ``wdone`` int64[W]: per producer, the batches whose parts it has written, when streams are dealt out to
  producers (``fills.planned``);
- ``done`` int64[S]: ``k + 1`` at ``k % S`` once batch k is whole, when one producer fills it whole
  (``fills.planned``);
- ``mark`` int64[W, 3]: per producer, the stream and step it is reading right now and the call it is in
  (``CALLS``), written before every call into the source that can block (an open, each step or block, a window):
  what a dead or stalled worker was doing, and the progress that ``timeout=`` measures.
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.shared.control.values import Int64, Values

NO_OWNER = -1  # a row waiting for its next claim: any producer may take it
NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call


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
    given = Int64(7)  # rows given up mid-stream and not yet taken
    moved = Int64(8)  # rows moved mid-stream since the loader started
    epoch = Int64(9)  # the epoch being produced (a transform's ``ctx.epoch``)
    balanced = Int64(10)  # 1 when the epoch's rows move to an idle producer (``fills.writers.Balanced``)
    start_rows = Int64(11)  # the schedule's rows: the global batch where ranks share one schedule, else B
    row_offset = Int64(12)  # this rank's first row in that schedule
    move_row = Int64(13)  # the row being handed over between producers (-1: none; ``Moves``)
    move_to = Int64(14)  # the producer it goes to
    move_at = Int64(15)  # the batch from which that producer writes it


class WorkerStats:
    """``wstat``'s columns by name, one entry per producer (float64 views of the shared table)."""

    WIDTH = 7

    def __init__(self, wstat: np.ndarray) -> None:
        self.busy = wstat[:, 0]  # seconds spent producing
        self.steps = wstat[:, 1]  # steps read
        self.stream = wstat[:, 2]  # the stream it read last (-1 before any)
        self.pos = wstat[:, 3]  # and its position in that stream
        self.idle = wstat[:, 4]  # 1 while it has nothing to do
        self.sent = wstat[:, 5]  # messages it has sent over its pipe
        self.load = wstat[:, 6]  # seconds its rows took in their last batch (the balanced policy's, ``fills.handover``)


class RowTable:
    """``rows``'s columns by name, one entry per batch row (int64 views of the shared table)."""

    WIDTH = 3

    def __init__(self, rows: np.ndarray) -> None:
        # Its producer; ``NO_OWNER`` while it waits for a claim, ``given_by(w)`` once producer w gave it up.
        self.owner = rows[:, 0]
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
        ("wdone", (num_workers,), "<i8"),
    )


# The source's call a producer is in, as ``mark[w, 2]`` holds it.
READING, OPENING, WINDOWING = 0, 1, 2
CALLS = {READING: "next()", OPENING: "open()", WINDOWING: "window()"}


def given_by(w: int) -> int:
    """The owner value of a live row producer ``w`` gave up mid-stream: any other producer may go on with it."""
    return -2 - w


class Arrays:
    """The control block's arrays, as every part of ``Control`` sees them (``Control.__init__`` sets them)."""

    _ctl: ControlValues
    _slot_of: np.ndarray
    _rows: RowTable
    _held: np.ndarray
    _wstat: WorkerStats
    _order: np.ndarray
    _start: np.ndarray
    _mark: np.ndarray
    _done: np.ndarray
    _wdone: np.ndarray
