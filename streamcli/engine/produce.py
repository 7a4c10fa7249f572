"""Where a batch is born: producers write rows' streams into slots, a run of steps at a time.

Determinism for any number of workers comes from one rule. A row that needs a new stream takes the next
*ticket* (an index into this epoch's shuffled order) at its canonical position ``key = (batch * T + t) * B + row``,
and only once every row has decided that it takes no ticket before that key. Each row publishes the key of its
next possible claim (``Control``), found by reading its stream one step ahead; a claim waits until its key is the
smallest. So the ticket a row gets, and hence every batch, depends only on the streams' contents, never on
timing or on which producer fills a row.

When every stream's length is known, the order of the claims follows from the lengths alone: each producer
replays that schedule (``engine.claims``), and a row takes its next ticket as soon as its stream ends, whatever
the other rows are doing. Then a slow stream holds up no other row's claims, and rows are coupled only by the
hand-out window. A stream that breaks its promise cannot shift the schedule: it is cut at its length, or its row
pads until then.

Rows are not tied to producers. A producer owns the rows whose streams it is reading; when a stream ends it
releases the row, and the next claim goes to whichever producer is free (an idle one first), which opens the
stream and owns the row from then on. That is how the work of expensive streams spreads over the workers. With
planned claims, a stream known to cost far more per step than the rest goes first (``engine.heavy``).
Producers run ahead of the consumer through the hand-out counter: any batch handed out may be written, so a
producer whose rows are cheap fills later batches while another finishes an expensive one.

A producer writes a row's steps of one batch as one run: the copy per step (or per block, for sources with
``block_steps = True``); the flags, cursors and completion of a piece of work are written at its end
(``engine.slots``). After a row's last step in a batch its cursor goes into the slot (``engine.cursor``), and an
epoch, fresh or resumed, starts from a table of cursors (``begin_epoch``): a live row reopens its stream with
``open(item, start=pos)``, so resuming replays nothing. Everything here is a plain function over plain per-row
facts (``Row``), shared by worker processes and the in-process path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.engine import cursor as _cursor
from streamcli.engine import heavy
from streamcli.engine.claims import ClaimPlan, next_claim_step, stream_end
from streamcli.engine.ring import CLAIMS, DRY, LIVE, NEVER, NO_OWNER, VALID, Ring
from streamcli.engine.slots import Notes, SlotViews, flush, pad, record
from streamcli.errors import SourceError, StepSpecError
from streamcli.source import Field, Step, StreamSource, item_name

_END = object()
_BLK = object()  # the look-ahead step lies in the row's current block
_NO_END = 1 << 62


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current work."""


@dataclass(frozen=True)
class Plan:
    """The static facts every producer shares: the plugin's name, its fields and the loader's one configuration.
    Picklable. The settings are read from ``config``, never copied."""

    plugin: str
    fields: tuple[Field, ...]
    config: LoaderConfig

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    @property
    def time_steps(self) -> int:
        return self.config.time_steps

    @property
    def boundary(self) -> str:
        return self.config.boundary

    @property
    def epoch_end(self) -> str:
        return self.config.epoch_end

    @property
    def on_error(self) -> str:
        return self.config.on_error

    @property
    def segment(self) -> int:
        return self.config.segment


@dataclass
class Row:
    """What one batch row is doing. ``it``/``nxt`` are derived: resume reopens ``item`` at ``pos``."""

    b: int
    item: int = -1  # index into items(), -1 before the first claim
    pos: int = 0  # index within the stream of the next step to write
    q: int = 0  # the epoch position of the next step to write: batch ``q // T``, step ``q % T``
    replay: bool = False
    fresh: bool = False  # the next step written is the first of a claim
    done: bool = False  # a claim failed: no more streams this epoch
    it: Iterator[Step] | None = None
    nxt: Any = None  # the looked-ahead step
    reopen: bool = False  # resumed mid-stream: open ``item`` at ``pos`` before the next step
    end: int = _NO_END  # the position at which the current stream (segment) ends
    follow: bool = False  # the segment ended, the item goes on: the next step starts its next segment
    expect: int = -1  # the position at which the item ends, if ``length()`` said so (checked, not trusted)
    blk: list[np.ndarray] | None = None  # block sources: the current block's arrays, in field order
    j: int = 0  # the next step's index in ``blk``
    open_ended: bool = False  # an item of unknown length cut into segments: they follow on this row
    short: bool = False  # the stream ended before its promise: padding until ``claim_q``
    claim_q: int = -1  # the epoch step of the row's next claim: planned, or announced on a promise (``_claim``)
    cost: float = 0.0  # seconds per step it has recently taken this producer (0: not measured yet)
    rate: float = 0.0  # the least seconds per step of its pieces between the first and the last: the item's cost
    noted: bool = False  # ``rate`` is in the items' cost table
    next_item: int = heavy.UNKNOWN  # planned claims: the item of the stream it claims next (-1: none)
    tally: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # this batch's slot summary record (``ring``)

    def cursor(self) -> tuple[int, int, int, int]:
        if self.done:
            state = _cursor.DRY
        elif self.follow:
            state = _cursor.FOLLOW
        elif self.short:
            state = _cursor.SHORT
        else:
            state = _cursor.LIVE if (self.it is not None or self.reopen) else _cursor.IDLE
        return _cursor.record(self.item, self.pos, state, self.replay, self.open_ended)


@dataclass(frozen=True)
class Skip:
    """An item skipped under on_error="skip" (``kind="skip"``), or a stream whose length differs from what
    ``length()`` promised (``kind="length"``; ``error`` says both numbers), reported with the batch in which it
    happened."""

    batch: int
    item: int
    name: str
    step: int
    error: str
    kind: str = "skip"


@dataclass
class Producer:
    """One producer's context: a worker process, or the main process when num_workers=0."""

    plan: Plan
    source: StreamSource
    items: Sequence[Any]
    ring: Ring
    w: int  # this producer's index in the control block
    lock: AbstractContextManager[Any]
    rows: dict[int, Row] = field(default_factory=dict)  # the rows this producer owns, by index
    gen: int = 0
    on_skip: Callable[[Skip], None] = lambda s: None
    parent_pid: int | None = None  # workers: exit if the parent is gone
    blocks: bool = False  # the source yields blocks of steps (``block_steps = True``)
    shared: bool = False  # other producers exist: publish claim keys as runs go (boundary "pack")
    steps: int = 0  # valid steps written, for the busy statistics
    idle: bool = False  # as published in the control block (``set_idle``)
    slots: dict[int, SlotViews] = field(default_factory=dict)
    out: Notes = field(default_factory=Notes)  # what the current piece of work wrote, for ``flush``
    last: tuple[int, SlotViews | None] = (-1, None)  # (batch, its SlotViews): the batch being written
    steps_t: np.ndarray = field(init=False)  # 0 .. T-1
    block: tuple[int, int] = (0, 0)  # the rows this producer reopens when its epoch starts
    setup: bool = False  # the epoch's rows are still to be read from the control block (``_set_up``)
    claims: ClaimPlan | None = None  # the epoch's planned claims, when every stream's length is known
    # The plan's numbers, read once: the per-run path reads them for every row of every batch.
    T: int = field(init=False)
    B: int = field(init=False)
    pack: bool = field(init=False)
    spec: list[tuple[str, tuple[int, ...], np.dtype[Any]]] = field(init=False)  # (name, shape, dtype) per field

    def __post_init__(self) -> None:
        self.T, self.B = self.plan.time_steps, self.plan.batch_size
        self.spec = [(f.name, f.shape, f.np_dtype) for f in self.plan.fields]
        self.pack = self.plan.boundary == "pack"
        self.steps_t = np.arange(self.T, dtype=np.int64)


def rows_from(cursors: np.ndarray, lo: int, segment: int, q: int) -> list[Row]:
    """Rows ``lo, lo+1, ...`` as the cursor records say, at epoch position ``q``; live ones reopen lazily.

    Segments start at multiples of ``segment`` in their item, so a live row at ``pos`` ends its segment at the
    next multiple (it has written at least one step of it, hence the ``pos - 1``)."""
    rows = []
    for i, (item, pos, state, flags) in enumerate(cursors.tolist()):
        row = Row(lo + i, item=item, pos=pos, q=q, replay=bool(flags & _cursor.REPLAYED))
        row.open_ended = bool(flags & _cursor.OPEN_ENDED)
        row.done = state == _cursor.DRY
        row.reopen = state in (_cursor.LIVE, _cursor.FOLLOW)
        row.follow = state == _cursor.FOLLOW
        row.short = state == _cursor.SHORT
        if segment and state in (_cursor.LIVE, _cursor.SHORT):
            row.end = ((pos - 1) // segment + 1) * segment
        rows.append(row)
    return rows


def epoch_rows(cursors: np.ndarray, first: int, T: int, bounds: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """The shared row table an epoch starts from (owner, claim key, batches written, held cursor): rows with a
    stream (or dry) belong to the producer of their block, which reopens them; idle rows wait for a claim."""
    B = len(cursors)
    state = cursors[:, _cursor.STATE]
    owner = np.full(B, NO_OWNER, np.int64)
    for w, (lo, hi) in enumerate(bounds):
        owner[lo:hi] = w
    owner[state == _cursor.IDLE] = NO_OWNER  # (a SHORT row pads until its claim: its block's producer keeps it)
    claim = first * T * B + np.arange(B, dtype=np.int64)
    claim[state == _cursor.DRY] = NEVER
    return owner, claim, np.full(B, first, np.int64), cursors.copy()


def begin_epoch(p: Producer, gen: int, lo: int, hi: int) -> None:
    """Start (or resume) an epoch from the cursor table in the control block: the one way in-process and worker
    producers begin. This producer takes the rows of its block ``[lo, hi)`` that hold a stream (or are dry),
    once the loader has written the epoch's tables (``_set_up``, on the first piece of work)."""
    close_rows(p.rows.values())
    p.gen = gen
    p.slots.clear()
    p.last = (-1, None)
    p.rows = {}
    p.block, p.setup, p.claims = (lo, hi), True, None


def _set_up(p: Producer) -> None:
    """Read the epoch's start from the control block: this producer's rows, and the planned claims if every
    stream's length is known. Not in ``begin_epoch``: a worker acknowledges the new epoch before the loader
    writes its streams (a producer of the old one may read them until it has acknowledged)."""
    control = p.ring.control
    lo, hi = p.block
    first, start, order = control.first_batch, control.cursors(0, p.B), control.order_table()
    p.setup = False
    if ClaimPlan.applies(order, start):
        p.claims = ClaimPlan.of_ring(order, start, first, control.tickets, T=p.T, pack=p.pack,
                                     segment=p.plan.segment, restream=p.plan.epoch_end == "restream")  # fmt: skip
    q = first * p.T
    rows = rows_from(start[lo:hi], lo, p.plan.segment, q)
    p.rows = {r.b: r for r in rows if r.done or r.reopen or r.short}
    for row in p.rows.values():
        _promise_again(p, row)


def _promise_again(p: Producer, row: Row) -> None:
    """A row that reopens its stream mid-way (resumed, or moved to another producer) checks the length that
    ``length()`` promised, as the row that opened it did: a stream that runs past it is cut there either way.
    With planned claims it also learns where its next claim is."""
    if not (row.reopen or row.short):
        return
    if p.claims is not None:
        row.expect = p.claims.item_length(row.item)
        end = stream_end(row.pos, row.expect, p.plan.segment)
        row.claim_q = next_claim_step(row.q, end - row.pos, p.T, p.pack)
    elif not p.plan.segment:
        row.expect = p.ring.control.promised_length(row.item, 0)


def close_rows(rows: Any) -> None:
    for row in list(rows):
        _close(row)


def fill(p: Producer, k: int) -> None:
    """The in-process path: produce until batch ``k`` is whole (its slot is handed out)."""
    control = p.ring.control
    t0, steps = time.perf_counter(), p.steps
    while control.written_min() <= k:
        if not work(p, k + 1):  # pragma: no cover - one producer owns every row, so it can always go on
            raise RuntimeError(f"internal error: batch {k} cannot be completed")
    control.report(p.w, time.perf_counter() - t0, p.steps - steps, *reading_of(p))


def work(p: Producer, limit: int) -> bool:
    """Do the most urgent piece of work in batches below ``limit`` that are handed out: the earliest claim if
    its turn has come (left to an idle or less loaded producer when this one has runs to do), else this
    producer's rows of its earliest batch. Returns False when there is nothing to do yet."""
    control = p.ring.control
    if control.generation != p.gen:
        raise Aborted
    if p.setup:
        _set_up(p)
    T, B = p.T, p.B
    top = min(control.handed, limit)  # batches below this may be written
    if control.given and _adopt(p, top, own=False):
        return True
    k_run = min((row.q for row in p.rows.values()), default=NEVER) // T
    runnable = k_run < top
    planned = p.claims is not None
    # Planned: the earliest row waiting for its claim (or the costliest); else the earliest undecided claim of all.
    b, key = control.next_waiting() if planned else control.next_claim()
    weigh = planned and p.shared and control.costs_uneven  # heavy streams first (``engine.heavy``)
    costly = False
    if weigh and key < NEVER:
        b, key, costly = heavy.costliest_claim(p, b, key, top)
    k_claim = key // (T * B)
    early = k_claim <= k_run or costly
    if k_claim < top and control.waiting(b) and (not runnable or (early and not _lighter_elsewhere(p))):
        with p.lock:  # the lock orders owners between processes
            held = control.take_row(b, p.w, key, planned)
        if held is not None:
            set_idle(p, False)
            if costly:
                control.count_heavy(p.w)
            t0, steps = time.perf_counter(), p.steps
            _take(p, b, held, key // B)
            if p.shared:
                if b in p.rows:
                    _measure(p, p.rows[b], t0, steps)
                _publish_load(p)
            flush(p.out, _slot(p, k_claim), p.ring.control, k_claim, p.steps_t)
            return True
    if not runnable:
        return bool(control.given) and _adopt(p, top, own=True)
    set_idle(p, False)
    lead = heavy.lead_row(p, k_run, top) if weigh else None
    if lead is not None:
        control.count_heavy(p.w)
        return _run_alone(p, lead, lead.q // T)
    todo = sorted((r for r in p.rows.values() if r.q // T == k_run), key=lambda r: r.b)
    if p.shared and len(p.rows) > 1:
        todo = _give_one(p, todo, k_run)
    for row in todo:
        t0, steps = time.perf_counter(), p.steps
        _run(p, row, k_run)
        if p.shared:
            _measure(p, row, t0, steps)
    if p.shared:
        _publish_load(p)
    flush(p.out, _slot(p, k_run), p.ring.control, k_run, p.steps_t)
    return True


def set_idle(p: Producer, idle: bool) -> None:
    """Publish whether this producer has nothing to do. Cleared as soon as it takes on a piece of work, before
    the work: the others must not count on it while it opens a stream (a seek can take a third of a second)."""
    if p.idle != idle:
        p.idle = idle
        p.ring.control.set_idle(p.w, idle)


def _give_one(p: Producer, todo: list[Row], k: int) -> list[Row]:
    """Give one of this producer's rows up mid-stream if batch ``k`` is the one everything waits for and another
    producer is idle; returns the rows left to run for batch ``k``.

    Claims by load place new streams well, but a stream stays with whoever took it until it ends, and costs are
    only known once it runs: at an epoch's start, or when one clip decodes 50 times slower than the rest, one
    producer holds the row every batch waits for plus cheap ones, while the other has run as far ahead as it may
    and idles. Then the cheapest row moves: the idle producer reopens its stream at the row's position
    (``open(item, start)``, as a resumed row does), and this one keeps its costlier rows. Any of its rows may
    move, not only those of batch ``k``: two expensive rows a few batches apart would otherwise stay together.
    Only a live row at a batch boundary moves, and never the last one, so the expensive stream is not passed
    around. Who writes a row never changes its content."""
    control = p.ring.control
    if control.written_min() < k or not control.idle_elsewhere(p.w):
        return todo
    T = p.T
    live = (_cursor.LIVE, _cursor.FOLLOW)
    movable = [r for r in p.rows.values() if r.q % T == 0 and r.cursor()[_cursor.STATE] in live]
    movable = [r for r in movable if r.cost]  # measured: never move a row of unknown cost
    if len(movable) < 2:
        return todo
    row = min(movable, key=lambda r: (r.cost, r.b))
    cursor = row.cursor()  # before closing: the stream goes on at ``row.pos``
    _close(row)
    del p.rows[row.b]
    with p.lock:
        control.give_row(row.b, p.w, cursor)
    _publish_load(p)
    return [r for r in todo if r is not row]


def _adopt(p: Producer, top: int, own: bool) -> bool:
    """Take a row another producer gave up mid-stream (``_give_one``), or with ``own`` one this producer gave up
    itself, reopen its stream and write its batch."""
    control = p.ring.control
    with p.lock:
        got = control.take_given(p.w, top, own)
    if got is None:
        return False
    set_idle(p, False)
    b, held = got
    k = control.written_of(b)
    row = rows_from(held[None, :], b, p.plan.segment, k * p.T)[0]
    _promise_again(p, row)
    p.rows[b] = row
    return _run_alone(p, row, k)


def _run_alone(p: Producer, row: Row, k: int) -> bool:
    """A piece of work of one row: its steps of batch ``k`` (a row just adopted, or one running ahead)."""
    t0, steps = time.perf_counter(), p.steps
    _run(p, row, k)
    if row.b in p.rows:  # not released: its cost still counts
        _measure(p, row, t0, steps)
    _publish_load(p)
    flush(p.out, _slot(p, k), p.ring.control, k, p.steps_t)
    return True


def _lighter_elsewhere(p: Producer) -> bool:
    """Whether a claim is better left to another producer: one that is idle, or whose rows cost less per batch.

    Rows move between producers only when their streams end, so whoever takes a stream keeps it to its end, and
    batches complete at the pace of the most loaded producer. Costs differ a hundredfold between streams (one
    clip's frames can take 50 times another's to decode), so the load is measured, not counted in rows."""
    return p.shared and p.ring.control.lighter_elsewhere(p.w)


def _measure(p: Producer, row: Row, t0: float, steps: int) -> None:
    """Fold a run's seconds per step into the row's cost (a moving average; a stream's open counts too)."""
    n = p.steps - steps
    if n:
        per_step = (time.perf_counter() - t0) / n
        # The item's cost per step, from the pieces that read as many steps as they wrote: not the one that
        # opened the stream, nor the one that ended it (its first step was read ahead by the piece before).
        if row.cost and row.it is not None:
            if not row.rate:
                row.rate = per_step
            elif per_step < row.rate or not row.noted:  # from two pieces on, the least (preemption only slows)
                row.rate, row.noted = min(row.rate, per_step), True
                p.ring.control.note_cost(row.item, row.rate)
        row.cost = per_step if not row.cost else 0.5 * (row.cost + per_step)
    elif row.done:
        row.cost = 0.0  # dry: it only pads


def _publish_load(p: Producer) -> None:
    """This producer's load for the others' claim decisions: what its rows cost per batch."""
    p.ring.control.set_load(p.w, _TIE * len(p.rows) + p.T * sum(r.cost for r in p.rows.values()))


_TIE = 1e-9  # seconds per batch added per row held: with no costs measured yet, the fewer rows, the lighter


def reading_of(p: Producer) -> tuple[int, int]:
    """(stream, position) of one row this producer reads, for the statistics and a dead worker's message."""
    for row in p.rows.values():
        if row.it is not None:
            return row.item, row.pos
    return -1, 0


def _slot(p: Producer, k: int) -> SlotViews:
    if p.last[0] == k and p.last[1] is not None:
        return p.last[1]
    slot = p.ring.control.slot_of(k)
    got = p.slots.get(slot)
    if got is None:
        got = SlotViews.of(p.ring.tb_slots[slot], p.spec)
        p.slots[slot] = got
    p.last = (k, got)
    return got


def _take(p: Producer, b: int, held: np.ndarray, q: int) -> None:
    """Claim the next stream for waiting row ``b`` at epoch position ``q`` (its turn has come), then run it."""
    item, pos, _, flags = held.tolist()
    row = Row(b, item=item, pos=pos, q=q, replay=bool(flags & _cursor.REPLAYED))
    row.open_ended = bool(flags & _cursor.OPEN_ENDED)
    T = p.T
    k = q // T
    if q % T:  # released mid-batch: the counts of this batch so far were left in the slot
        row.tally = _slot(p, k).summary[b].tolist()
    p.rows[b] = row
    _claim(p, row, k)
    _publish(p, row)
    _run(p, row, k)


def _publish(p: Producer, row: Row) -> None:
    """Announce the row's next possible claim: after the looked-ahead step, which exists and goes at ``row.q``."""
    if row.done:
        key = NEVER
    elif p.claims is not None:
        key = row.claim_q * p.B + row.b  # planned: only this row waits for it
    else:
        key = _after_next_step(p, row) * p.B + row.b
    p.ring.control.set_claim(row.b, key)


def _after_next_step(p: Producer, row: Row) -> int:
    """Unplanned claims: the earliest epoch step of the row's next claim, after its step at ``row.q``."""
    return row.q + 1 if p.pack else (row.q // p.T + 1) * p.T


def _run(p: Producer, row: Row, k: int) -> None:
    """Write ``row``'s steps of batch ``k`` from ``row.q`` on, until the batch ends or its stream does (then the
    row is released for its next claim)."""
    T = p.T
    v = _slot(p, k)
    b = row.b
    t = row.q - k * T
    pack = p.pack
    if row.short:
        return _wait_out(p, row, v, k, t)
    if row.reopen:
        _reopen(p, row, k)
        if row.it is None:
            return _ended(p, row, v, k, t)
        _publish(p, row)
    while t < T:
        if row.done:
            pad(v, b, t, p.out)
            t = T
            break
        if row.follow:
            if t and not pack:  # "pad": the item's next segment starts at the next batch
                pad(v, b, t, p.out)
                t = T
                break
            row.follow, row.fresh, row.end = False, True, row.pos + p.plan.segment
        t = _copy(p, row, v, k, t)
        if row.it is None:
            return _ended(p, row, v, k, t)
        if not row.follow:
            break  # the batch is full
    row.q = (k + 1) * T
    _publish(p, row)
    _finish(p, row, v, k)


def _copy(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> int:
    """Copy the row's steps from batch step ``t`` on until the batch, the stream, its segment or its promised
    length ends; look one step ahead, close the stream if it is over. Returns the next batch step."""
    T = p.T
    b, pos0, t0 = row.b, row.pos, t
    stop = pos0 + (T - t)  # the batch end, the segment's end or the promised length: whichever comes first
    if row.end < stop:
        stop = row.end
    if 0 <= row.expect < stop:
        stop = row.expect
    it = row.it
    assert it is not None
    claims = p.shared and p.pack and p.claims is None  # let other rows' claims go as this run reads ahead
    control, B, q0 = p.ring.control, p.B, k * T + t0
    nxt: Any = row.nxt
    n = 0
    if p.blocks:
        fields = v.rows[b]
        while True:
            blk = row.blk
            assert blk is not None
            j = row.j
            size = len(blk[0])
            m = min(stop - pos0 - n, size - j)
            t = t0 + n
            for col, src in zip(fields, blk, strict=True):
                col[t : t + m] = src if m == size else src[j : j + m]
            n += m
            row.j = j + m
            if pos0 + n == stop:
                break
            row.pos = pos0 + n
            nxt = _look(p, row, k)
            if nxt is _END:
                break
            if claims:
                control.set_claim(b, (q0 + n + 1) * B + b)
    else:
        # Each field's column of this row, indexed by batch step alone: the per-step path is the same
        # next() and copy that a hand-written loop does, plus the shape and dtype check.
        cols = v.columns[b]
        t, t_stop = t0, t0 + (stop - pos0)
        ndarray, single, cells = np.ndarray, len(cols) == 1, v.cells
        name, shape, dtype, col = cols[0]
        while True:
            try:
                if single:  # the common source of one field: no inner loop
                    a = nxt[name]
                    if type(a) is not ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                        row.pos = pos0 + t - t0
                        a = _checked(p, row, nxt, name, shape, dtype)
                    if cells:
                        col[t][...] = a
                    else:
                        col[t] = a
                else:
                    for name, shape, dtype, col in cols:
                        a = nxt[name]
                        if type(a) is not ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                            row.pos = pos0 + t - t0
                            a = _checked(p, row, nxt, name, shape, dtype)
                        if cells:
                            col[t][...] = a
                        else:
                            col[t] = a
            except (KeyError, TypeError, IndexError):
                row.pos = pos0 + t - t0
                _checked(p, row, nxt, name, shape, dtype)  # raises the precise error
                raise
            t += 1
            if t == t_stop:
                break
            try:
                nxt = next(it, _END)
            except Exception as exc:
                row.pos = pos0 + t - t0
                _fail(p, row, k, exc, "reading")
                nxt, row.expect = _END, -1  # skipped, not short
            if nxt is _END:
                break
            if claims:
                control.set_claim(b, (q0 + t - t0 + 1) * B + b)
        n = t - t0
    p.out.runs.append((b, t0, n, row.item, pos0, row.replay, row.fresh))  # flags are written by ``flush``
    row.fresh = False
    pos = row.pos = pos0 + n
    row.tally[VALID] += n
    p.steps += n
    if pos == stop:  # the run ended at a limit, not at the stream's end: decide what comes next
        if pos == row.end and not row.open_ended:
            _close(row)  # the segment is over; the item's next one is a stream of its own
            return t0 + n
        nxt = _look(p, row, k)
    row.nxt = nxt
    if nxt is _END:
        if row.expect >= 0 and pos != row.expect:
            _mismatch(p, row, k, f"ended after {pos} steps")
        _close(row)
    elif pos == row.expect:  # it goes on past the promised length: cut it there, as len() counted
        _mismatch(p, row, k, "goes on past them")
        _close(row)
    elif pos == row.end:
        row.follow = True
    return t0 + n


def _finish(p: Producer, row: Row, v: SlotViews, k: int) -> None:
    """Row ``row``'s batch ``k`` is written: its cursor and counts go into the slot, then it is counted done."""
    row.tally[LIVE] = row.it is not None and not row.replay
    record(p.out, row.b, row.cursor(), row.tally)
    p.out.written.append(row.b)
    row.tally = [0, 0, 0, 0]


def _ended(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """The row's stream is over at batch step ``t``. Planned claims: if it ended before its promise (or failed
    under on_error="skip"), the row pads until its planned claim, so that no other row's batches change."""
    if p.claims is not None and k * p.T + t < row.claim_q:
        row.short = True
        return _wait_out(p, row, v, k, t)
    _release(p, row, v, k, t)


def _wait_out(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """Pad a row whose stream ended short of its promise, from batch step ``t`` until its next claim."""
    T = p.T
    stop = min(T, row.claim_q - k * T)
    pad(v, row.b, t, p.out, stop)
    if k * T + stop == row.claim_q:  # the claim is due: the row is free
        row.short = False
        return _release(p, row, v, k, stop)
    row.pos += stop - t  # still padding: the position counts on, so a resumed row knows where its claim is
    row.q = (k + 1) * T
    _finish(p, row, v, k)


def _release(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """The row's stream is over at batch step ``t``: give the row up until its next claim, which is at the next
    step ("pack") or at the next batch ("pad", padding the rest of this one)."""
    T = p.T
    b = row.b
    if t and not p.pack:
        pad(v, b, t, p.out)
        t = T
    del p.rows[b]
    row.tally[LIVE] = 0  # mid-batch, the next owner carries on counting this batch
    cursor = row.cursor()
    record(p.out, b, cursor, row.tally)
    written = k + 1 if t == T else k
    p.out.releases.append((b, (k * T + t) * p.B + b, written, cursor))


def _claim(p: Producer, row: Row, k: int) -> None:
    """Give ``row`` its next stream: its turn has come (no row can claim before it).

    A stream whose item promised a length that covers its start has a first step, so the row announces its next
    possible claim as soon as it holds the ticket: the next claim need not wait for this stream's open (a video
    seek can take a third of a second). Should the promise fail (the stream is empty, or fails to open under
    on_error="skip"), the row keeps that announcement: it is padding until then (``row.short``)."""
    if p.claims is not None:
        return _claim_planned(p, p.claims, row, k)
    control = p.ring.control
    n = control.num_streams
    segment = p.plan.segment
    empty_replays = 0
    while True:
        with p.lock:  # the lock orders the ticket counter between processes
            ticket = control.take_ticket()
        row.tally[CLAIMS] += 1
        replay = ticket >= n
        if replay and (p.plan.epoch_end != "restream" or n == 0 or empty_replays >= n):
            row.done = True
            row.tally[DRY] += 1
            return
        item, start, open_ended, length = control.stream(ticket)
        row.item, row.pos, row.replay, row.fresh, row.open_ended = item, start, replay, True, open_ended
        row.end = start + segment if segment else _NO_END
        row.expect = start + length if length >= 0 and not segment else -1
        row.blk, row.j = None, 0
        if 0 <= length <= start:  # promised empty: nothing to open, take the next ticket at the same position
            empty_replays += replay
            continue
        promised = length > start
        if promised:
            _publish(p, row)
        row.it = _open(p, row, k)
        row.nxt = _END if row.it is None else _look(p, row, k)
        if row.nxt is not _END:
            return
        _close(row)
        if promised:
            if row.expect >= 0:  # not a skipped failure (that is reported already)
                _mismatch(p, row, k, "ended after 0 steps")
            row.short, row.claim_q = True, _after_next_step(p, row)
            return
        empty_replays += replay  # an empty (or skipped) stream: take the next ticket at the same position


def _claim_planned(p: Producer, plan: ClaimPlan, row: Row, k: int) -> None:
    """``_claim`` when every length is known: the tickets and the next claim come from the plan, so the row may
    claim whatever the other rows are doing. A stream that ends before its promise leaves the row padding."""
    got = plan.claim(row.b, row.q * p.B + row.b, p.ring.control.written_min() * p.T * p.B)
    row.tally[CLAIMS] += got.count
    ticket = got.first + got.count - 1 - got.dry  # the stream it takes (dry: the last empty one it passed)
    if ticket >= got.first:
        item, start, _, length = p.ring.control.stream(ticket)
        row.item, row.pos, row.replay, row.fresh, row.open_ended = item, start, ticket >= plan.n, True, False
    if got.dry:
        row.done = True
        row.tally[DRY] += 1
        return
    row.end = start + p.plan.segment if p.plan.segment else _NO_END
    row.expect = length
    row.blk, row.j = None, 0
    row.claim_q = next_claim_step(row.q, plan.steps_of(ticket), p.T, p.pack)
    row.it = _open(p, row, k)
    row.nxt = _END if row.it is None else _look(p, row, k)
    if row.nxt is _END:
        _close(row)
        if row.expect >= 0:  # not a skipped failure (that is reported already)
            _mismatch(p, row, k, f"ended after {row.pos} steps")
        row.short = True


def _open(p: Producer, row: Row, k: int) -> Iterator[Step] | None:
    try:
        it = iter(p.source.open(p.items[row.item], row.pos))
    except Exception as exc:
        _fail(p, row, k, exc, "opening")
        row.expect = -1  # skipped, not short
        return None
    return it


def _checked_block(p: Producer, row: Row, block: Any, fields: Sequence[Field]) -> list[np.ndarray]:
    """The block's arrays in field order; raise ``StepSpecError`` if a field is missing, mis-shaped or of another
    step count than the rest."""
    try:  # the usual block: exact arrays, checked in a few comparisons each
        if len(p.spec) == 1:  # the common source of one field: no loops
            name, shape, dtype = p.spec[0]
            a = block[name]
            if type(a) is np.ndarray and a.shape[1:] == shape and (a.dtype is dtype or a.dtype == dtype) and len(a):
                return [a]
        else:
            out = [block[name] for name, _, _ in p.spec]
            n = len(out[0])
            for a, (_, shape, dtype) in zip(out, p.spec, strict=True):
                if (type(a) is not np.ndarray or a.shape[1:] != shape or (a.dtype is not dtype and a.dtype != dtype)
                        or len(a) != n or not n):  # fmt: skip
                    break
            else:
                return out
    except (KeyError, TypeError, IndexError):
        pass
    return _checked_block_slowly(p, row, block, fields)


def _checked_block_slowly(p: Producer, row: Row, block: Any, fields: Sequence[Field]) -> list[np.ndarray]:
    """The full check: converts array-likes, and names the field, the item and the step of what is wrong."""

    def where() -> str:  # only on error: the item's name can cost more than the check
        return f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} block at step {row.pos}"

    out: list[np.ndarray] = []
    for f in fields:
        try:
            a = block[f.name]
        except (KeyError, TypeError, IndexError):
            raise StepSpecError(
                f"{where()}: the block has no field {f.name!r} (got {type(block).__name__}); with block_steps=True "
                "yield a dict of (n, *shape) arrays, one per declared field"
            ) from None
        if type(a) is not np.ndarray:
            a = np.asarray(a)
        if a.ndim != len(f.shape) + 1 or a.shape[1:] != f.shape or a.dtype != f.np_dtype or len(a) < 1:
            raise StepSpecError(
                f"{where()}: field {f.name!r} is {a.dtype.name}{list(a.shape)} but a block of n >= 1 steps must be "
                f"{f.np_dtype.name}[n, {', '.join(map(str, f.shape))}]; make the block match fields()"
            )
        if out and len(a) != len(out[0]):
            raise StepSpecError(f"{where()}: fields of one block must have the same n steps; {f.name!r} has "
                                f"{len(a)}, another has {len(out[0])}")  # fmt: skip
        out.append(a)
    return out


def _reopen(p: Producer, row: Row, k: int) -> None:
    """Continue a resumed row's stream at ``row.pos``: ``open(item, start=pos)``, nothing replayed."""
    row.reopen = False
    row.it = _open(p, row, k)
    row.nxt = _END if row.it is None else _look(p, row, k)
    if row.nxt is _END:
        _close(row)  # the stream ended exactly at the cut (or failed): the row claims at its next chance


def _look(p: Producer, row: Row, k: int) -> Any:
    """The row's look-ahead: the next step, ``_BLK`` when it is ``row.blk[...][row.j]``, or ``_END``."""
    assert row.it is not None
    if p.blocks:
        if row.blk is not None and row.j < len(row.blk[0]):
            return _BLK
        try:
            block: Any = next(row.it, _END)
        except Exception as exc:
            _fail(p, row, k, exc, "reading")
            row.expect = -1  # skipped, not short
            return _END
        if block is _END:
            return _END
        row.blk, row.j = _checked_block(p, row, block, p.plan.fields), 0
        return _BLK
    try:
        return next(row.it, _END)
    except Exception as exc:
        _fail(p, row, k, exc, "reading")
        row.expect = -1  # skipped, not short
        return _END


def _fail(p: Producer, row: Row, k: int, exc: Exception, doing: str) -> None:
    if isinstance(exc, StepSpecError):
        raise exc  # a block that breaks the declared fields is the plugin's bug: never skipped, never wrapped
    name = item_name(p.source, p.items[row.item])
    if p.plan.on_error == "skip":
        error = f"{type(exc).__name__}: {exc}"
        p.on_skip(Skip(batch=k, item=row.item, name=name, step=row.pos, error=error))
        return
    err = SourceError(
        f"plugin {p.plan.plugin!r} failed {doing} item {name!r} (stream {row.item}) at step {row.pos}: "
        f"{type(exc).__name__}: {exc}"
    )
    raise err from exc


def _mismatch(p: Producer, row: Row, k: int, what: str) -> None:
    name = item_name(p.source, p.items[row.item])
    msg = f"item {name!r} (stream {row.item}): length() said {row.expect} steps but it {what}"
    p.on_skip(Skip(batch=k, item=row.item, name=name, step=row.pos, error=msg, kind="length"))


def _checked(p: Producer, row: Row, step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The slow path of the per-step check: convert scalars and lists, or raise naming what is wrong."""
    try:
        a = step[name]
    except (KeyError, TypeError, IndexError):
        raise StepSpecError(
            f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} step {row.pos}: "
            f"the step has no field {name!r} (got {type(step).__name__}); yield a dict with every declared field"
        ) from None
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.shape != shape or a.dtype != dtype:
        raise StepSpecError(
            f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} step {row.pos}: field "
            f"{name!r} is {a.dtype.name}{list(a.shape)} but the source declared {dtype.name}{list(shape)}; "
            "make the step match fields() (e.g. resize or .astype)"
        )
    return a


def _close(row: Row) -> None:
    it, row.it, row.nxt, row.follow, row.blk = row.it, None, None, False, None
    close = getattr(it, "close", None)
    if callable(close):
        try:
            close()  # release generators' files promptly
        except Exception:
            pass
