"""The ring's control block: the shared state through which the loader and the producers coordinate, and the
only code that knows its layout (``Control``; the loader and the producers call its methods, never index it).

Its arrays (``arrays``), in the segment before the batch slots (``lives.ring``):

- ``ctl`` int64[10]: the generation, tickets handed out, the epoch's first batch, its number of streams,
  batches handed out, the generation whose tables are ready, the batch the loader is blocked on, rows given up
  mid-stream and not yet taken, rows moved mid-stream in all, the epoch
  (what a transform's ``ctx.epoch`` says);
- ``slot_of`` int64[S]: the slot of batch k, at ``k % S``;
- ``rows`` int64[B, 3]: per row, its producer (or -1 while it waits for a claim, or -2-w while producer w has
  given it up mid-stream), the canonical key of its next possible claim, and the batches it has completed;
- ``held`` int64[B, 4]: the cursor of a row without a producer;
- ``wstat`` float64[W, 8]: per producer, busy seconds, steps, the stream and position it is reading, idle,
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

_GEN, _TICKETS, _FIRST_BATCH, _NUM_STREAMS, _HANDED, _READY, _AWAITED, _GIVEN, _MOVED, _EPOCH = range(10)
_BUSY, _STEPS, _CUR_STREAM, _CUR_POS, _IDLE, _SENT, _LOAD, _HEAVY = range(8)  # columns of wstat
OWNER, CLAIM, WRITTEN = 0, 1, 2  # columns of rows
NO_OWNER = -1  # a row waiting for its next claim: any producer may take it
NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
_SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current work."""


def arrays(batch_size: int, num_slots: int, num_workers: int,
           num_streams: int) -> tuple[tuple[str, tuple[int, ...], str], ...]:  # fmt: skip
    """The control block's arrays as (name, shape, dtype), in the order ``Control`` takes them."""
    B = batch_size
    return (
        ("ctl", (10,), "<i8"),
        ("slot_of", (num_slots,), "<i8"),
        ("rows", (B, 3), "<i8"),
        ("held", (B, _cursor.WIDTH), "<i8"),
        ("wstat", (num_workers, 8), "<f8"),
        ("order", (num_streams, 4), "<i8"),
        ("start", (B, _cursor.WIDTH), "<i8"),
        ("mark", (num_workers, 2), "<i8"),
        ("done", (num_slots,), "<i8"),
        ("wdone", (num_workers,), "<i8"),
    )


def _given_by(w: int) -> int:
    """The owner value of a live row producer ``w`` gave up mid-stream: any other producer may go on with it."""
    return -2 - w


class Control:
    """The control block's arrays behind methods: the loader and the producers call these, never index it.

    Rows are not tied to producers. A row whose stream ends is released (owner -1, its cursor in ``held``) and
    whichever producer is free takes it for the next claim: that is how work moves to idle workers. Tickets
    stay in canonical order through one rule: a claim at key K is made only when K is the smallest ``claim``
    of all rows, i.e. when every row has decided (by reading ahead) that it takes no ticket before K. With
    planned claims (``scheduled.claims``: every length known) each waiting row's key and tickets are fixed in
    advance, and any row whose key is handed out may claim. Values in ``claim`` and ``written`` only grow
    within an epoch, and each row has one writer at a time (its owner, changed only under the lock), so readers
    need no lock: a stale read only makes them wait longer.
    """

    def __init__(self, ctl: np.ndarray, slot_of: np.ndarray, rows: np.ndarray, held: np.ndarray,
                 wstat: np.ndarray, order: np.ndarray, start: np.ndarray,
                 mark: np.ndarray, done: np.ndarray, wdone: np.ndarray):  # fmt: skip
        self._ctl, self._slot_of, self._rows, self._held = ctl, slot_of, rows, held
        self._wstat, self._order, self._start, self._mark = wstat, order, start, mark
        self._done, self._wdone = done, wdone
        self._owner, self._claim, self._written = rows[:, OWNER], rows[:, CLAIM], rows[:, WRITTEN]

    def clear(self) -> None:
        for a in (self._ctl, self._slot_of, self._rows, self._held, self._wstat, self._order, self._start,
                  self._mark, self._done):  # fmt: skip
            a[...] = 0
        self._wstat[:, _CUR_STREAM] = -1  # nothing read yet
        self._mark[:, 0] = -1
        self._ctl[_READY] = -1
        self._ctl[_AWAITED] = -1

    def release(self) -> None:
        """Drop the views (the segment is about to be unmapped)."""
        empty = np.zeros(0)
        self._ctl = self._slot_of = self._rows = self._held = self._wstat = self._order = self._start = empty
        self._mark = self._done = self._wdone = empty
        self._owner = self._claim = self._written = empty

    # -- generation: a new epoch (or closing) makes producers drop what they are doing
    @property
    def generation(self) -> int:
        return int(self._ctl[_GEN])

    def set_generation(self, gen: int) -> None:
        self._ctl[_GEN] = gen

    # -- an epoch's set-up, written by the loader
    def stage(self, cursors: np.ndarray, first_batch: int, epoch: int = 0) -> None:
        """The row cursors the next epoch starts from, the batch it starts at, and its number."""
        self._start[:] = cursors
        self._ctl[_FIRST_BATCH] = first_batch
        self._ctl[_EPOCH] = epoch

    def set_streams(self, table: np.ndarray, tickets: int) -> None:
        """The epoch's streams in ticket order and the tickets already taken."""
        self._order[: len(table)] = table
        self._ctl[_NUM_STREAMS] = len(table)
        self._ctl[_TICKETS] = tickets

    def set_rows(self, owner: np.ndarray, claim: np.ndarray, written: np.ndarray, held: np.ndarray) -> None:
        self._owner[:], self._claim[:], self._written[:], self._held[:] = owner, claim, written, held
        self._ctl[_GIVEN] = 0
        self._done[:] = 0
        self._wdone[:] = 0

    def open_epoch(self, gen: int, first_batch: int) -> None:
        """The tables of generation ``gen`` are written: producers may start (nothing is handed out yet)."""
        self._ctl[_HANDED] = first_batch
        self._ctl[_READY] = gen

    # -- the hand-out counter: batch k may be written once ``handed > k``
    def hand_out(self, k: int, slot: int) -> None:
        self._slot_of[k % len(self._slot_of)] = slot
        self._ctl[_HANDED] = k + 1  # after the slot: a producer that sees the count sees the slot

    @property
    def handed(self) -> int:
        return int(self._ctl[_HANDED])

    def slot_of(self, k: int) -> int:
        return int(self._slot_of[k % len(self._slot_of)])

    def ready(self, gen: int) -> bool:
        return int(self._ctl[_READY]) == gen

    # -- read by producers
    @property
    def epoch(self) -> int:
        """The epoch being produced (``stage``): a transform's ``ctx.epoch``."""
        return int(self._ctl[_EPOCH])

    @property
    def first_batch(self) -> int:
        return int(self._ctl[_FIRST_BATCH])

    def cursors(self, lo: int, hi: int) -> np.ndarray:
        return self._start[lo:hi]

    @property
    def num_streams(self) -> int:
        return int(self._ctl[_NUM_STREAMS])

    @property
    def tickets(self) -> int:
        """Tickets taken: those before the epoch's start until producers take more (unplanned claims)."""
        return int(self._ctl[_TICKETS])

    def order_table(self) -> np.ndarray:
        """The epoch's streams in ticket order (a copy): (item, first step, open-ended, promised length)."""
        return self._order[: int(self._ctl[_NUM_STREAMS])].copy()

    def take_ticket(self) -> int:
        """The next ticket (hold the lock): the epoch's tickets are handed out in canonical order."""
        ticket = int(self._ctl[_TICKETS])
        self._ctl[_TICKETS] = ticket + 1
        return ticket

    def stream(self, ticket: int) -> tuple[int, int, bool, int]:
        """(item, first step, open-ended, promised length or -1) of the stream ticket ``ticket`` names."""
        item, start, open_ended, length = self._order[ticket % int(self._ctl[_NUM_STREAMS])].tolist()
        return item, start, bool(open_ended), length

    # -- rows
    def next_claim(self) -> tuple[int, int]:
        """(row, key) of the earliest undecided claim of all rows; the row may be owned or waiting."""
        b = int(np.argmin(self._claim))
        return b, int(self._claim[b])

    def next_waiting(self) -> tuple[int, int]:
        """(row, key) of the earliest claim of the rows waiting for one; key ``NEVER`` if none waits."""
        owner = self._owner
        if len(owner) <= _SMALL and NO_OWNER not in owner.tolist():  # the usual case, 20 times faster
            return 0, NEVER
        keys = np.where(owner == NO_OWNER, self._claim, NEVER)
        b = int(np.argmin(keys))
        return b, int(keys[b])

    def waiting_below(self, key: int) -> list[tuple[int, int]]:
        """(key, row) of every row waiting for a claim at a key below ``key``, earliest first. Other producers
        may take or release rows meanwhile, so an entry can be stale by the time it is used (``take_row`` says)."""
        claim = self._claim.copy()  # one read: the two columns change under us
        rows = np.flatnonzero((self._owner == NO_OWNER) & (claim < key))
        return sorted(zip(claim[rows].tolist(), rows.tolist(), strict=True))

    def waiting(self, b: int) -> bool:
        return int(self._owner[b]) == NO_OWNER

    def take_row(self, b: int, w: int, key: int, planned: bool = False) -> np.ndarray | None:
        """Make producer ``w`` the owner of waiting row ``b`` if its claim at ``key`` is still the earliest of
        all, or with ``planned`` claims still due (hold the lock); returns the row's held cursor, or None if
        another producer was first."""
        if int(self._owner[b]) != NO_OWNER or int(self._claim[b]) != key:
            return None
        if not planned and int(self._claim.min()) != key:
            return None
        self._owner[b] = w
        held: np.ndarray = self._held[b].copy()
        return held

    def release_row(self, b: int, claim: int, written: int, cursor: tuple[int, int, int, int]) -> None:
        """Give row ``b`` up until its next claim at key ``claim`` (the owner calls this)."""
        self._held[b] = cursor
        self._written[b] = written
        self._claim[b] = claim
        self._owner[b] = NO_OWNER  # last: a producer that sees the row free sees its cursor and claim

    def give_row(self, b: int, w: int, cursor: tuple[int, int, int, int]) -> None:
        """Producer ``w`` gives live row ``b`` up mid-stream, at a batch boundary (its completed batches say which),
        for an idle producer to go on with (hold the lock). Its claim key stays as announced: the row takes no
        ticket, it only changes hands."""
        self._held[b] = cursor
        self._owner[b] = _given_by(w)  # not NO_OWNER: the row is not waiting for a claim
        self._ctl[_GIVEN] += 1
        self._ctl[_MOVED] += 1

    @property
    def given(self) -> int:
        """Rows given up mid-stream that no producer has taken yet (a cheap check before ``take_given``)."""
        return int(self._ctl[_GIVEN])

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return int(self._ctl[_MOVED])

    def take_given(self, w: int, top: int, own: bool) -> tuple[int, np.ndarray] | None:
        """Make producer ``w`` the owner of the earliest row given up mid-stream whose next batch is below
        ``top`` (hold the lock): (row, its cursor), or None. Rows ``w`` gave up itself only if ``own``: a giver
        takes one back only when it has nothing else to do, never before the idle producer can."""
        owner = self._owner
        given = owner <= _given_by(0)
        if not own:
            given &= owner != _given_by(w)
        rows = np.flatnonzero(given & (self._written < top))
        if not len(rows):
            return None
        b = int(rows[np.argmin(self._written[rows])])
        self._owner[b] = w
        self._ctl[_GIVEN] -= 1
        held: np.ndarray = self._held[b].copy()
        return b, held

    def written_of(self, b: int) -> int:
        return int(self._written[b])

    def promised_length(self, item: int, start: int) -> int:
        """The length that ``length()`` promised for the stream of ``item`` starting at ``start``, or -1."""
        order = self._order[: int(self._ctl[_NUM_STREAMS])]
        at = np.flatnonzero((order[:, 0] == item) & (order[:, 1] == start))
        return int(order[at[0], 3]) if len(at) else -1

    def idle_elsewhere(self, w: int) -> bool:
        """Whether a producer other than ``w`` has nothing to do."""
        idle = self._wstat[:, _IDLE]
        return bool(idle.sum() - idle[w] > 0)

    def set_claim(self, b: int, key: int) -> None:
        self._claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        self._written[rows] = batches

    def await_batch(self, k: int) -> None:
        """The loader is about to block until batch ``k`` is whole (-1: it is not blocked)."""
        self._ctl[_AWAITED] = k

    def wake_due(self) -> bool:
        """Whether the batch the loader is blocked on is whole; the first producer to see it clears the mark and
        wakes the loader (a second wake-up is harmless)."""
        k = int(self._ctl[_AWAITED])
        if k < 0 or not self.batch_done(k):
            return False
        self._ctl[_AWAITED] = -1
        return True

    def set_done(self, k: int) -> None:
        """Batch ``k`` is whole, filled by one producer (the planned path's random-access sources)."""
        self._done[k % len(self._done)] = k + 1

    def batch_done(self, k: int) -> bool:
        """Whether batch ``k`` is whole: every row has completed it, one producer filled it whole, or every
        producer has done its part of it (``set_worker_done``)."""
        return (int(self._done[k % len(self._done)]) == k + 1 or self.written_min() > k
                or int(self._wdone.min()) > k)  # fmt: skip

    def set_worker_done(self, w: int, k: int) -> None:
        """Producer ``w`` has written its rows of batch ``k`` (and of every batch before it)."""
        self._wdone[w] = k + 1

    def done_after(self, k: int) -> int:
        """Batches after ``k`` that are already whole."""
        n = 0
        while n < len(self._done) and self.batch_done(k + 1 + n):
            n += 1
        return n

    def written_min(self) -> int:
        """Batches that every row has completed: batch k is whole once this exceeds k."""
        written = self._written
        return min(written.tolist()) if len(written) <= _SMALL else int(np.minimum.reduce(written))

    # -- per-producer counters
    def report(self, w: int, busy: float, steps: int, stream: int, pos: int) -> None:
        """A producer's counters after a piece of work: busy seconds and steps (added), where it is reading."""
        stat = self._wstat[w]
        stat[_BUSY] += busy
        stat[_STEPS] += steps
        stat[_CUR_STREAM], stat[_CUR_POS] = stream, pos

    def set_idle(self, w: int, idle: bool) -> None:
        self._wstat[w, _IDLE] = idle

    def set_load(self, w: int, load: float) -> None:
        """Producer ``w``'s load: the seconds per batch its rows cost it."""
        self._wstat[w, _LOAD] = load

    def lighter_elsewhere(self, w: int) -> bool:
        """Whether another producer is idle or carries less load than ``w`` (then claims are left to it)."""
        stat = self._wstat
        idle, loads = stat[:, _IDLE], stat[:, _LOAD]
        return bool(idle.sum() - idle[w] > 0 or loads.min() < loads[w])

    def sent(self, w: int) -> int:
        """Messages producer ``w`` has sent over its pipe (it counts each just before sending it)."""
        return int(self._wstat[w, _SENT])

    def count_sent(self, w: int) -> None:
        self._wstat[w, _SENT] += 1

    # -- read by the loader
    def busy(self) -> np.ndarray:
        return self._wstat[:, _BUSY].copy()

    def steps(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self._wstat[:, _STEPS])

    def reading(self, w: int) -> tuple[int, int]:
        """(stream, step) producer ``w`` is reading, or was when it stopped (``mark``); stream -1 before any."""
        mark = self._mark[w]
        return int(mark[0]), int(mark[1])

    def mark_of(self, w: int) -> np.ndarray:
        """Producer ``w``'s mark, ``[stream, step]``, which it writes before each call into the source."""
        mark: np.ndarray = self._mark[w]
        return mark

    def progress(self) -> tuple[int, ...]:
        """A snapshot that changes whenever any producer reads a step, opens a stream or completes a row."""
        return (*self._mark.ravel().tolist(), int(self._written.sum()), int(self._done.sum()), int(self._wdone.sum()))
