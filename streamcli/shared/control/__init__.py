"""The ring's control block: the shared state through which the loader and the producers coordinate, and the only
code that knows its layout (``Control``; the loader and the producers call its methods, never index it). Its
arrays, and the views that name their values and columns, are in ``layout``.
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.layout import (
    CALLS,
    NEVER,
    SMALL,
    ControlValues,
    RowTable,
    WorkerStats,
    arrays,
    epoch_rows,
)

__all__ = ["CLOSING", "NEVER", "Aborted", "Control", "arrays", "epoch_rows"]

CLOSING = -2  # the generation that tells workers to read their pipe for "quit" (or to stop starting)


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current work."""


class Control:
    """The control block's arrays behind methods, in four parts: the epoch's tables (batch k may be written once
    ``handed > k``); the rows (owner, next claim key, batches completed; a row handed over to an idle producer);
    completion (batch k is whole once its one producer marked it, ``set_done``, or every row has completed it,
    ``written_min() > k``); and the producers' reports.

    Where lengths are not all known, a claim at key K is made only when K is the smallest ``claim`` of all rows
    (``fills.iterators``), so tickets stay in canonical order. ``claim`` and ``written`` only grow within an epoch and
    each row has one writer at a time, so readers need no lock: a stale read only makes them wait longer.
    """

    def __init__(
        self,
        ctl: np.ndarray,
        slot_of: np.ndarray,
        rows: np.ndarray,
        held: np.ndarray,
        wstat: np.ndarray,
        order: np.ndarray,
        start: np.ndarray,
        mark: np.ndarray,
        done: np.ndarray,
    ):
        self._ctl, self._rows, self._wstat = ControlValues(ctl), RowTable(rows), WorkerStats(wstat)
        self._slot_of, self._held, self._order, self._start, self._mark = slot_of, held, order, start, mark
        self._slots = slot_of.data.cast("B").cast("q")  # read by a producer per batch: Python ints
        self._done_array = done
        self._done = done.data.cast("B").cast("q")  # read per wait of the loader: Python ints, no numpy scalar
        self._cleared: tuple[np.ndarray, ...] = (ctl, slot_of, rows, held, wstat, order, start, mark, done)

    def clear(self) -> None:
        for a in self._cleared:
            a[...] = 0
        self._mark[:, 0] = -1  # nothing read yet
        self._ctl.ready = -1
        self._ctl.awaited = -1
        self._ctl.move_row = -1

    def release(self) -> None:
        """Drop the views (the segment is about to be unmapped)."""
        empty = np.zeros(0)
        self._ctl = ControlValues(np.zeros(ControlValues.SIZE, np.int64))
        self._rows = RowTable(np.zeros((0, RowTable.WIDTH), np.int64))
        self._wstat = WorkerStats(np.zeros((0, WorkerStats.WIDTH)))
        self._slot_of = self._held = self._order = self._start = self._mark = self._done_array = empty
        self._done = self._slots = memoryview(b"").cast("q")
        self._cleared = ()

    # ------------------------------------------------------------------ the epoch's tables, written by the loader

    @property
    def generation(self) -> int:
        return self._ctl.generation

    def set_generation(self, gen: int) -> None:
        self._ctl.generation = gen

    def stage(
        self, cursors: np.ndarray, first_batch: int, epoch: int = 0, balanced: bool = False, offset: int = 0
    ) -> None:
        """The row cursors the next epoch starts from (the global batch's rows where ranks share one schedule, this
        rank's from ``offset``), the batch it starts at, its number, and whether its rows are balanced between
        producers (``fills.writers.Balanced``) even where every length is known."""
        self._start[: len(cursors)] = cursors
        ctl = self._ctl
        ctl.first_batch, ctl.epoch, ctl.balanced = first_batch, epoch, balanced
        ctl.start_rows, ctl.row_offset = len(cursors), offset

    def set_streams(self, table: np.ndarray, tickets: int) -> None:
        """The epoch's streams in ticket order and the tickets already taken."""
        self._order[: len(table)] = table
        self._ctl.num_streams = len(table)
        self._ctl.tickets = tickets

    def set_rows(self, owner: np.ndarray, claim: np.ndarray, written: np.ndarray, held: np.ndarray) -> None:
        """The row table the epoch starts from (``epoch_rows``); no batch is done, no row moving."""
        rows = self._rows
        rows.owner[:], rows.claim[:], rows.written[:], self._held[:] = owner, claim, written, held
        self._ctl.move_row = -1
        self._done_array[:] = 0

    def open_epoch(self, gen: int, first_batch: int) -> None:
        """The tables of generation ``gen`` are written: producers may start (nothing is handed out yet)."""
        self._ctl.handed = first_batch
        self._ctl.ready = gen

    def publish(self, k: int, slot: int) -> None:
        """Batch ``k`` goes into ``slot``: producers may fill it from now on."""
        self._slot_of[k % len(self._slot_of)] = slot
        self._ctl.handed = k + 1  # after the slot: a producer that sees the count sees the slot

    # ------------------------------------------------------------------ the epoch's tables, read by the producers

    def tables_ready(self, gen: int) -> bool:
        """Whether the epoch tables of generation ``gen`` are written (a producer may start on them)."""
        return self._ctl.ready == gen

    @property
    def handed(self) -> int:
        return self._ctl.handed

    def slot_of(self, k: int) -> int:
        slot: int = self._slots[k % len(self._slots)]
        return slot

    @property
    def schedule_rows(self) -> tuple[int, int]:
        """(the schedule's rows, this rank's first row among them), as staged for the epoch."""
        return self._ctl.start_rows, self._ctl.row_offset

    @property
    def balanced(self) -> bool:
        return bool(self._ctl.balanced)

    @property
    def epoch(self) -> int:
        """The epoch being produced (``stage``): a transform's ``ctx.epoch``."""
        return self._ctl.epoch

    @property
    def first_batch(self) -> int:
        return self._ctl.first_batch

    def cursors(self, lo: int, hi: int) -> np.ndarray:
        return self._start[lo:hi]

    @property
    def tickets(self) -> int:
        """Tickets taken: those before the epoch's start until producers take more (unplanned claims)."""
        return self._ctl.tickets

    def order_table(self) -> np.ndarray:
        """The epoch's streams in ticket order (a copy): (item, first step, open-ended, promised length)."""
        return self._order[: self._ctl.num_streams].copy()

    def take_ticket(self) -> int:
        """The next ticket (hold the lock): the epoch's tickets are handed out in canonical order."""
        ticket = self._ctl.tickets
        self._ctl.tickets = ticket + 1
        return ticket

    # ------------------------------------------------------------------ rows: claims, owners

    def earliest_claim(self) -> int:
        """The smallest key any row may still claim at, read in one pass (keys only grow, so it never exceeds the
        true one; an argmin then a second read of that row could)."""
        return int(self._rows.claim.min())

    def set_claim(self, b: int, key: int) -> None:
        self._rows.claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        """``rows`` have completed every batch below ``batches``: the row policies' completion mark."""
        self._rows.written[rows] = batches

    def owned_by(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows producer ``w`` owns (a mask), and the batches each row has completed (a copy)."""
        return self._rows.owner == w, self._rows.written.copy()

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return self._ctl.moved

    # ------------------------------------------------------------------ a row handed over to an idle producer

    def taker(self, w: int) -> int | None:
        """An idle producer other than ``w``, if no hand-over is in flight: the one a row may go to."""
        if self._ctl.move_row >= 0:
            return None
        idle = self._wstat.idle.copy()
        idle[w] = 0
        found = np.flatnonzero(idle)
        return int(found[0]) if len(found) else None

    def hand_over(self, b: int, to: int, k: int, cursor: list[int]) -> bool:
        """Row ``b`` goes to producer ``to`` from batch ``k`` on, at ``cursor`` (its giver has marked it written
        through ``k - 1``), unless another hand-over is in flight (hold the lock). One at a time: the taker ends it
        (``arrived``)."""
        ctl = self._ctl
        if ctl.move_row >= 0:
            return False
        ctl.move_row, ctl.move_to, ctl.move_at = b, to, k
        self._held[b] = cursor
        self._rows.owner[b] = to  # last: a taker that sees itself the owner sees the cursor
        return True

    @property
    def moving(self) -> tuple[int, int, int]:
        """(row, to, batch) of the hand-over in flight; row -1 when none."""
        ctl = self._ctl
        return ctl.move_row, ctl.move_to, ctl.move_at

    def arrived(self, w: int) -> tuple[int, int, np.ndarray] | None:
        """(row, batch, its cursor there) if a row has been handed over to producer ``w`` (hold the lock); the
        hand-over is over then."""
        ctl = self._ctl
        b = ctl.move_row
        if b < 0 or ctl.move_to != w or int(self._rows.owner[b]) != w:
            return None
        ctl.move_row = -1
        ctl.moved += 1
        held: np.ndarray = self._held[b].copy()
        return b, int(ctl.move_at), held

    # ------------------------------------------------------------------ completion

    def set_done(self, k: int) -> None:
        """Batch ``k`` is whole, filled by one producer."""
        self._done[k % len(self._done)] = k + 1

    def written_min(self) -> int:
        """Batches that every row has completed: batch k is whole once this exceeds k."""
        written = self._rows.written
        return min(written.tolist()) if len(written) <= SMALL else int(np.minimum.reduce(written))

    def batch_done(self, k: int) -> bool:
        """Whether batch ``k`` is whole: one producer filled it whole, or every row has completed it."""
        return self._done[k % len(self._done)] == k + 1 or self.written_min() > k

    def await_batch(self, k: int) -> None:
        """The loader is about to block until batch ``k`` is whole (-1: it is not blocked)."""
        self._ctl.awaited = k

    def wake_due(self) -> bool:
        """Whether the batch the loader is blocked on is whole: the first producer to see it clears the mark and
        wakes the loader."""
        k = self._ctl.awaited
        if k < 0 or not self.batch_done(k):
            return False
        self._ctl.awaited = -1
        return True

    def done_after(self, k: int) -> int:
        """Batches after ``k`` that are already whole."""
        n = 0
        while n < len(self._done) and self.batch_done(k + 1 + n):
            n += 1
        return n

    # ------------------------------------------------------------------ the producers' reports

    def report(self, w: int, busy: float, steps: int) -> None:
        """A producer's counters after a piece of work: busy seconds and steps, added."""
        items, at = self._wstat.items, w * WorkerStats.WIDTH
        items[at + WorkerStats.BUSY] += busy
        items[at + WorkerStats.STEPS] += steps

    def set_idle(self, w: int, idle: bool) -> None:
        self._wstat.items[w * WorkerStats.WIDTH + WorkerStats.IDLE] = idle

    def idle_elsewhere(self, w: int) -> bool:
        """Whether a producer other than ``w`` has nothing to do."""
        idle = self._wstat.idle
        return bool(idle.sum() - idle[w] > 0)

    def set_load(self, w: int, seconds: float) -> None:
        self._wstat.load[w] = seconds

    def load_of(self, w: int) -> float:
        """Seconds producer ``w``'s rows took in their last timed batch, as it said last (``fills.balanced``)."""
        return float(self._wstat.load[w])

    def sent(self, w: int) -> int:
        """Messages producer ``w`` has sent over its pipe (it counts each just before sending it)."""
        return int(self._wstat.items[w * WorkerStats.WIDTH + WorkerStats.SENT])

    def count_sent(self, w: int) -> None:
        self._wstat.items[w * WorkerStats.WIDTH + WorkerStats.SENT] += 1

    def busy(self) -> np.ndarray:
        return self._wstat.busy.copy()

    def steps(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self._wstat.steps)

    def mark_of(self, w: int) -> np.ndarray:
        """Producer ``w``'s mark, ``[stream, step, call]``, which it writes before each call into the source."""
        mark: np.ndarray = self._mark[w]
        return mark

    def reading(self, w: int) -> tuple[int, int]:
        """(stream, step) producer ``w`` is reading, or was when it stopped (``mark``); stream -1 before any."""
        mark = self._mark[w]
        return int(mark[0]), int(mark[1])

    def call_of(self, w: int) -> str:
        """The source's call producer ``w`` is in (or was last in): ``open()``, ``next()`` or ``window()``."""
        return CALLS.get(int(self._mark[w][2]), "next()")

    def progress(self) -> tuple[int, ...]:
        """A snapshot that changes whenever any producer reads a step, opens a stream or completes a part."""
        return (*self._mark.ravel().tolist(), int(self._rows.written.sum()), sum(self._done))
