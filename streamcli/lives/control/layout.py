"""The control block's layout: its arrays (``arrays``) and their columns, in the segment before the batch slots
(``lives.ring``). Only the classes of ``lives.control`` index them.

- ``ctl`` int64[11]: the generation, tickets handed out, the epoch's first batch, its number of streams,
  batches handed out, the generation whose tables are ready, the batch the loader is blocked on, rows given up
  mid-stream and not yet taken, rows moved mid-stream in all, the epoch
  (what a transform's ``ctx.epoch`` says), whether the epoch's rows are balanced (claimed at run time);
- ``slot_of`` int64[S]: the slot of batch k, at ``k % S``;
- ``rows`` int64[B, 3]: per row, its producer (or -1 while it waits for a claim, or -2-w while producer w has
  given it up mid-stream), the canonical key of its next possible claim, and the batches it has completed;
- ``held`` int64[B, 4]: the cursor of a row without a producer;
- ``wstat`` float64[W, 7]: per producer, busy seconds, steps, the stream and position it is reading, idle,
  messages sent, what its rows cost per batch;
- ``order`` int64[N, 4]: this epoch's streams in ticket order, as (item, first step, open-ended, promised
  length); a segment is a stream of its own (``scheduled.streams``);
- ``start`` int64[B, 4]: the row cursors an epoch starts from, fresh or those of a resumed state;
- ``wdone`` int64[W]: per producer, the batches whose parts it has written, when streams are dealt out to
  producers (``fills.planned``);
- ``done`` int64[S]: ``k + 1`` at ``k % S`` once batch k is whole, when one producer fills it whole
  (``fills.planned``);
- ``mark`` int64[W, 2]: per producer, the stream and step it is reading right now, written before every call
  into the source that can block (an open, each step or block): what a dead worker was doing, and the progress
  that ``timeout=`` measures.
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor as _cursor

GEN, TICKETS, FIRST_BATCH, NUM_STREAMS, HANDED, READY, AWAITED, GIVEN, MOVED, EPOCH, BALANCED = range(11)  # of ctl
BUSY, STEPS, CUR_STREAM, CUR_POS, IDLE, SENT, LOAD = range(7)  # columns of wstat
OWNER, CLAIM, WRITTEN = 0, 1, 2  # columns of rows
NO_OWNER = -1  # a row waiting for its next claim: any producer may take it
NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call


def arrays(batch_size: int, num_slots: int, num_workers: int,
           num_streams: int) -> tuple[tuple[str, tuple[int, ...], str], ...]:  # fmt: skip
    """The control block's arrays as (name, shape, dtype), in the order ``Control`` takes them."""
    B = batch_size
    return (
        ("ctl", (11,), "<i8"),
        ("slot_of", (num_slots,), "<i8"),
        ("rows", (B, 3), "<i8"),
        ("held", (B, _cursor.WIDTH), "<i8"),
        ("wstat", (num_workers, 7), "<f8"),
        ("order", (num_streams, 4), "<i8"),
        ("start", (B, _cursor.WIDTH), "<i8"),
        ("mark", (num_workers, 2), "<i8"),
        ("done", (num_slots,), "<i8"),
        ("wdone", (num_workers,), "<i8"),
    )


def given_by(w: int) -> int:
    """The owner value of a live row producer ``w`` gave up mid-stream: any other producer may go on with it."""
    return -2 - w


class Arrays:
    """The control block's arrays, as every part of ``Control`` sees them (``Control.__init__`` sets them)."""

    _ctl: np.ndarray
    _slot_of: np.ndarray
    _rows: np.ndarray
    _held: np.ndarray
    _wstat: np.ndarray
    _order: np.ndarray
    _start: np.ndarray
    _mark: np.ndarray
    _done: np.ndarray
    _wdone: np.ndarray
    _owner: np.ndarray  # the columns of ``rows``
    _claim: np.ndarray
    _written: np.ndarray
