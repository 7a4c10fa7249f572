"""The ring's control block: the shared state through which the loader and the producers coordinate. ``Control``
alone knows its layout (``arrays``, in the segment before the batch slots); everyone else calls its methods.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase

NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
CLOSING = -2  # the generation that tells workers to read their pipe for "quit" (or to stop starting)
SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call
READING, OPENING, WINDOWING = 0, 1, 2  # the source's call a producer is in (``mark[w, 2]``)
CALLS = {READING: "next()", OPENING: "open()", WINDOWING: "window()"}

# ``ctl``'s values.
(GENERATION, TICKETS, FIRST_BATCH, NUM_STREAMS, HANDED, READY, AWAITED, MOVED) = range(8)
(EPOCH, BALANCED, START_ROWS, ROW_OFFSET, MOVE_ROW, MOVE_TO, MOVE_AT) = range(8, 15)
VALUES = 15
# ``wstat``'s columns.
BUSY, STEPS, IDLE, SENT, LOAD = range(5)


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current work."""


def arrays(
    batch_size: int, num_slots: int, num_workers: int, num_streams: int, global_rows: int = 0
) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    """The control block's arrays as (name, shape, dtype), in the order ``Control`` takes them; ``global_rows``:
    the global batch's rows where ranks share one schedule (0: ``batch_size``)."""
    B = batch_size
    return (
        ("ctl", (VALUES,), "<i8"),  # the single values, at the indices above
        ("slot_of", (num_slots,), "<i8"),  # the slot of batch k, at k % S
        ("rows", (B, 3), "<i8"),  # per row: owner, next claim key (NEVER: none this epoch), batches completed
        ("held", (B, _cursor.WIDTH), "<i8"),  # the cursor of a row handed over between producers
        ("wstat", (num_workers, 5), "<f8"),  # per producer: the columns above
        ("order", (num_streams, 4), "<i8"),  # streams in ticket order: item, first step, open-ended, promised length
        ("start", (max(B, global_rows), _cursor.WIDTH), "<i8"),  # the row cursors an epoch starts from
        ("mark", (num_workers, 3), "<i8"),  # per producer: the stream, step and call (CALLS) it is in
        ("done", (num_slots,), "<i8"),  # k + 1 at k % S once batch k is whole, where one producer fills it
    )


def _ints(a: np.ndarray) -> memoryview[int]:
    """The same memory as Python ints: a memoryview's item costs less than a numpy scalar."""
    return a.data.cast("B").cast("q")


class Control:
    """The control block's arrays behind methods: the epoch's tables (batch k may be written once ``handed > k``),
    the rows (owner, next claim key, batches completed, a row handed over), completion and the producers' reports.
    ``claim`` and ``written`` only grow within an epoch and each row has one writer at a time, so readers need no
    lock: a stale read only makes them wait longer."""

    def __init__(self, *arrays: np.ndarray) -> None:
        ctl, slot_of, rows, held, wstat, order, start, mark, done = arrays
        self._arrays = arrays
        self._v, self._slots, self._done = _ints(ctl), _ints(slot_of), _ints(done)
        self._w = wstat.data.cast("B").cast("d")  # producer w's column c at ``w * 5 + c``, as Python floats
        self._owner, self._claim, self._written = rows[:, 0], rows[:, 1], rows[:, 2]
        self._held, self._wstat, self._order, self._start, self._mark = held, wstat, order, start, mark
        self._done_array = done

    def clear(self) -> None:
        for a in self._arrays:
            a[...] = 0
        self._mark[:, 0] = -1  # nothing read yet
        self._v[READY] = self._v[AWAITED] = self._v[MOVE_ROW] = -1

    def release(self) -> None:
        """Drop the views (the segment is about to be unmapped): later calls touch arrays of their own."""
        Control.__init__(self, *(np.zeros(shape, dt) for _, shape, dt in arrays(0, 1, 1, 0)))

    @property
    def generation(self) -> int:
        return self._v[GENERATION]

    def set_generation(self, gen: int) -> None:
        self._v[GENERATION] = gen

    def stage(
        self, cursors: np.ndarray, first_batch: int, epoch: int = 0, balanced: bool = False, offset: int = 0
    ) -> None:
        """The next epoch's starting row cursors (this rank's from ``offset``), first batch, number and balance."""
        self._start[: len(cursors)] = cursors
        v = self._v
        v[FIRST_BATCH], v[EPOCH], v[BALANCED] = first_batch, epoch, int(balanced)
        v[START_ROWS], v[ROW_OFFSET] = len(cursors), offset

    def set_streams(self, table: np.ndarray, tickets: int) -> None:
        """The epoch's streams in ticket order and the tickets already taken."""
        self._order[: len(table)] = table
        self._v[NUM_STREAMS], self._v[TICKETS] = len(table), tickets

    def set_rows(self, owner: np.ndarray, claim: np.ndarray, written: np.ndarray, held: np.ndarray) -> None:
        """The row table the epoch starts from (``epoch_rows``); no batch is done, no row moving."""
        self._owner[:], self._claim[:], self._written[:], self._held[:] = owner, claim, written, held
        self._v[MOVE_ROW] = -1
        self._done_array[:] = 0

    def open_epoch(self, gen: int, first_batch: int) -> None:
        """The tables of generation ``gen`` are written: producers may start (nothing is handed out yet)."""
        self._v[HANDED] = first_batch
        self._v[READY] = gen

    def publish(self, k: int, slot: int) -> None:
        """Batch ``k`` goes into ``slot``: producers may fill it from now on."""
        self._slots[k % len(self._slots)] = slot
        self._v[HANDED] = k + 1  # after the slot: a producer that sees the count sees the slot

    def tables_ready(self, gen: int) -> bool:
        """Whether the epoch tables of generation ``gen`` are written (a producer may start on them)."""
        return self._v[READY] == gen

    @property
    def handed(self) -> int:
        return self._v[HANDED]

    def slot_of(self, k: int) -> int:
        return self._slots[k % len(self._slots)]

    @property
    def schedule_rows(self) -> tuple[int, int]:
        """(the schedule's rows, this rank's first row among them), as staged for the epoch."""
        return self._v[START_ROWS], self._v[ROW_OFFSET]

    @property
    def balanced(self) -> bool:
        return bool(self._v[BALANCED])

    @property
    def epoch(self) -> int:
        """The epoch being produced (``stage``): a transform's ``ctx.epoch``."""
        return self._v[EPOCH]

    @property
    def first_batch(self) -> int:
        return self._v[FIRST_BATCH]

    def cursors(self, lo: int, hi: int) -> np.ndarray:
        return self._start[lo:hi]

    @property
    def tickets(self) -> int:
        """Tickets taken: those before the epoch's start, and the producers' since (unplanned claims)."""
        return self._v[TICKETS]

    def order_table(self) -> np.ndarray:
        """The epoch's streams in ticket order (a copy): (item, first step, open-ended, promised length)."""
        return self._order[: self._v[NUM_STREAMS]].copy()

    def take_ticket(self) -> int:
        """The next ticket (hold the lock): the epoch's tickets are handed out in canonical order."""
        ticket: int = self._v[TICKETS]
        self._v[TICKETS] = ticket + 1
        return ticket

    def earliest_claim(self) -> int:
        """The smallest key any row may still claim at, in one pass (keys only grow: an argmin, then a read, could
        exceed the true one)."""
        return int(self._claim.min())

    def set_claim(self, b: int, key: int) -> None:
        self._claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        """``rows`` have completed every batch below ``batches``: the row policies' completion mark."""
        self._written[rows] = batches

    def owned_by(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows producer ``w`` owns (a mask), and the batches each row has completed (a copy)."""
        return self._owner == w, self._written.copy()

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return self._v[MOVED]

    def taker(self, w: int) -> int | None:
        """An idle producer other than ``w``, if no hand-over is in flight: the one a row may go to."""
        if self._v[MOVE_ROW] >= 0:
            return None
        idle = self._wstat[:, IDLE].copy()
        idle[w] = 0
        found = np.flatnonzero(idle)
        return int(found[0]) if len(found) else None

    def hand_over(self, b: int, to: int, k: int, cursor: list[int]) -> bool:
        """Row ``b`` goes to producer ``to`` from batch ``k`` on, at ``cursor``, unless another hand-over is in flight
        (hold the lock); the taker ends it (``arrived``)."""
        v = self._v
        if v[MOVE_ROW] >= 0:
            return False
        v[MOVE_ROW], v[MOVE_TO], v[MOVE_AT] = b, to, k
        self._held[b] = cursor
        self._owner[b] = to  # last: a taker that sees itself the owner sees the cursor
        return True

    @property
    def moving(self) -> tuple[int, int, int]:
        """(row, to, batch) of the hand-over in flight; row -1 when none."""
        return self._v[MOVE_ROW], self._v[MOVE_TO], self._v[MOVE_AT]

    def arrived(self, w: int) -> tuple[int, int, np.ndarray] | None:
        """(row, batch, its cursor there) if a row has been handed over to producer ``w``, ending it (hold the lock)."""
        v = self._v
        b: int = v[MOVE_ROW]
        if b < 0 or v[MOVE_TO] != w or int(self._owner[b]) != w:
            return None
        v[MOVE_ROW] = -1
        v[MOVED] += 1
        return b, v[MOVE_AT], self._held[b].copy()

    def set_done(self, k: int) -> None:
        """Batch ``k`` is whole, filled by one producer."""
        self._done[k % len(self._done)] = k + 1

    def written_min(self) -> int:
        """Batches that every row has completed: batch k is whole once this exceeds k."""
        written = self._written
        return min(written.tolist()) if len(written) <= SMALL else int(np.minimum.reduce(written))

    def batch_done(self, k: int) -> bool:
        """Whether batch ``k`` is whole: one producer filled it whole, or every row has completed it."""
        return self._done[k % len(self._done)] == k + 1 or self.written_min() > k

    def await_batch(self, k: int) -> None:
        """The loader is about to block until batch ``k`` is whole (-1: it is not blocked)."""
        self._v[AWAITED] = k

    def wake_due(self) -> bool:
        """Whether the batch the loader is blocked on is whole; the first producer to see it clears the mark."""
        k: int = self._v[AWAITED]
        if k < 0 or not self.batch_done(k):
            return False
        self._v[AWAITED] = -1
        return True

    def done_after(self, k: int) -> int:
        """Batches after ``k`` that are already whole."""
        n = 0
        while n < len(self._done) and self.batch_done(k + 1 + n):
            n += 1
        return n

    def report(self, w: int, busy: float, steps: int) -> None:
        """A producer's counters after a piece of work: busy seconds and steps, added."""
        self._w[w * 5 + BUSY] += busy
        self._w[w * 5 + STEPS] += steps

    def set_idle(self, w: int, idle: bool) -> None:
        self._w[w * 5 + IDLE] = idle

    def idle_elsewhere(self, w: int) -> bool:
        """Whether a producer other than ``w`` has nothing to do."""
        idle = self._wstat[:, IDLE]
        return bool(idle.sum() - idle[w] > 0)

    def set_load(self, w: int, seconds: float) -> None:
        self._w[w * 5 + LOAD] = seconds

    def load_of(self, w: int) -> float:
        """Seconds producer ``w``'s rows took in their last timed batch, as it said last (``fills.balanced``)."""
        return self._w[w * 5 + LOAD]

    def sent(self, w: int) -> int:
        """Messages producer ``w`` has sent over its pipe (it counts each just before sending it)."""
        return int(self._w[w * 5 + SENT])

    def count_sent(self, w: int) -> None:
        self._w[w * 5 + SENT] += 1

    def busy(self) -> np.ndarray:
        return self._wstat[:, BUSY].copy()

    def steps(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self._wstat[:, STEPS])

    def mark_of(self, w: int) -> np.ndarray:
        """Producer ``w``'s mark, ``[stream, step, call]``, which it writes before each call into the source."""
        mark: np.ndarray = self._mark[w]
        return mark

    def reading(self, w: int) -> tuple[int, int]:
        """(stream, step) producer ``w`` is reading, or was when it stopped (``mark``); stream -1 before any."""
        return int(self._mark[w, 0]), int(self._mark[w, 1])

    def call_of(self, w: int) -> str:
        """The source's call producer ``w`` is in (or was last in): ``open()``, ``next()`` or ``window()``."""
        return CALLS.get(int(self._mark[w, 2]), "next()")

    def progress(self) -> tuple[int, ...]:
        """What ``timeout=`` measures: changes whenever a producer enters a call into the source or completes a part."""
        return (*self._mark.ravel().tolist(), int(self._written.sum()), sum(self._done))


def epoch_rows(cursors: np.ndarray, first: int, T: int, bounds: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """The shared row table an epoch starts from (owner, claim key, batches written, held cursor): each row belongs
    to the producer of its block (``bounds``), which reopens its stream."""
    B = len(cursors)
    owner = np.zeros(B, np.int64)
    for w, (lo, hi) in enumerate(bounds):
        owner[lo:hi] = w
    claim = first * T * B + np.arange(B, dtype=np.int64)
    claim[cursors[:, _cursor.STATE] == RowPhase.DRY] = NEVER
    return owner, claim, np.full(B, first, np.int64), cursors.copy()
