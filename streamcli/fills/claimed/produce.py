"""What a producer of the balanced policy does next, and why no batch depends on it.

Determinism for any number of workers comes from one rule. A row that needs a new stream takes the next
*ticket* (an index into this epoch's shuffled order) at its canonical position ``key = (batch * T + t) * B + row``,
and only once every row has decided that it takes no ticket before that key. Each row publishes the key of its
next possible claim (``Control``), found by reading its stream one step ahead; a claim waits until its key is the
smallest. So the ticket a row gets, and hence every batch, depends only on the streams' contents, never on
timing or on which producer fills a row.

(Under the other policies producers follow the schedule instead, ``fills.planned``: the claims follow from the
lengths, known or found as the streams are read.)

Rows are not tied to producers. A producer owns the rows whose streams it is reading; when a stream ends it
releases the row, and the next claim goes to whichever producer is free (an idle one first), which opens the
stream and owns the row from then on. That is how the work of expensive streams spreads over the workers.
Producers run ahead of the consumer through the hand-out counter: any batch handed out may be written, so a
producer whose rows are cheap fills later batches while another finishes an expensive one.

A producer's facts (its rows, the shared fill spec) are ``fills.claimed.rows``; how it claims a stream and writes a
row's run of steps is ``fills.claimed.write``. Everything here is a plain function over them, shared by worker processes
and the in-process path.
"""

from __future__ import annotations

import time

from streamcli.fills.claimed import claim, write
from streamcli.fills.claimed.notes import flush
from streamcli.fills.claimed.rows import Producer, Row, rows_from
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowState
from streamcli.shared.control import NEVER, Aborted


def begin_epoch(p: Producer, gen: int, lo: int, hi: int) -> None:
    """Start (or resume) an epoch from the cursor table in the control block: the one way in-process and worker
    producers begin. This producer takes the rows of its block ``[lo, hi)`` that hold a stream (or are dry),
    once the loader has written the epoch's tables (``_set_up``, on the first piece of work)."""
    claim.close_rows(p.rows.values())
    p.gen = gen
    p.slots.clear()
    p.last = (-1, None)
    p.rows = {}
    p.block, p.setup = (lo, hi), True


def _set_up(p: Producer) -> None:
    """Read the epoch's start from the control block: this producer's rows. Not in ``begin_epoch``: a worker
    acknowledges the new epoch before the loader writes its streams (a producer of the old one may read them until
    it has acknowledged)."""
    control = p.ring.control
    lo, hi = p.block
    first, start = control.first_batch, control.cursors(0, p.B)
    p.setup = False
    q = first * p.T
    rows = rows_from(start[lo:hi], lo, p.fill_spec.segment, q)
    p.rows = {r.b: r for r in rows if r.done or r.reopen or r.short}
    for row in p.rows.values():
        claim.promise_again(p, row)
        if row.short and not claim.pad_to_promise(p, row, q):  # padding until its promise, or due at once
            row.claim_q = q
            claim.publish(p, row)


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
    b, key = control.next_claim()  # the earliest undecided claim of all
    k_claim = key // (T * B)
    early = k_claim <= k_run
    if k_claim < top and control.waiting(b) and (not runnable or (early and not _lighter_elsewhere(p))):
        with p.lock:  # the lock orders owners between processes
            held = control.take_row(b, p.w, key)
        if held is not None:
            set_idle(p, False)
            t0, steps = time.perf_counter(), p.steps
            write.take(p, b, held, key // B)
            if p.shared:
                if b in p.rows:
                    _measure(p, p.rows[b], t0, steps)
                _publish_load(p)
            flush(p.out, write.slot_views(p, k_claim), p.ring.control, k_claim, p.steps_t)
            return True
    if not runnable:
        return bool(control.given) and _adopt(p, top, own=True)
    set_idle(p, False)
    todo = sorted((r for r in p.rows.values() if r.q // T == k_run), key=lambda r: r.b)
    if p.shared and len(p.rows) > 1:
        todo = _give_one(p, todo, k_run)
    for row in todo:
        t0, steps = time.perf_counter(), p.steps
        write.run(p, row, k_run)
        if p.shared:
            _measure(p, row, t0, steps)
    if p.shared:
        _publish_load(p)
    flush(p.out, write.slot_views(p, k_run), p.ring.control, k_run, p.steps_t)
    return True


def set_idle(p: Producer, idle: bool) -> None:
    """Publish whether this producer has nothing to do. Cleared as soon as it takes on a piece of work, before
    the work: the others must not count on it while it opens a stream (a seek can be slow)."""
    if p.idle != idle:
        p.idle = idle
        p.ring.control.set_idle(p.w, idle)
        if idle:
            p.mark[0] = -1  # reading nothing: a death now is not a source's


def _give_one(p: Producer, todo: list[Row], k: int) -> list[Row]:
    """Give one of this producer's rows up mid-stream if batch ``k`` is the one everything waits for and another
    producer is idle; returns the rows left to run for batch ``k``.

    Claims by load place new streams well, but a stream stays with whoever took it until it ends, and costs are
    only known once it runs: at an epoch's start, or when one clip decodes far slower than the rest, one
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
    live = (RowState.LIVE, RowState.FOLLOW)
    movable = [r for r in p.rows.values() if r.q % T == 0 and r.cursor()[_cursor.STATE] in live]
    movable = [r for r in movable if r.cost]  # measured: never move a row of unknown cost
    if len(movable) < 2:
        return todo
    row = min(movable, key=lambda r: (r.cost, r.b))
    cursor = row.cursor()  # before closing: the stream goes on at ``row.pos``
    claim.close(row)
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
    row = rows_from(held[None, :], b, p.fill_spec.segment, k * p.T)[0]
    claim.promise_again(p, row)
    p.rows[b] = row
    return _run_alone(p, row, k)


def _run_alone(p: Producer, row: Row, k: int) -> bool:
    """A piece of work of one row: its steps of batch ``k`` (a row just adopted, or one running ahead)."""
    t0, steps = time.perf_counter(), p.steps
    write.run(p, row, k)
    if row.b in p.rows:  # not released: its cost still counts
        _measure(p, row, t0, steps)
    _publish_load(p)
    flush(p.out, write.slot_views(p, k), p.ring.control, k, p.steps_t)
    return True


def _lighter_elsewhere(p: Producer) -> bool:
    """Whether a claim is better left to another producer: one that is idle, or whose rows cost less per batch.

    Rows move between producers only when their streams end, so whoever takes a stream keeps it to its end, and
    batches complete at the pace of the most loaded producer. Costs differ by orders of magnitude between
    streams (one clip's frames can take far longer than another's to decode), so the load is measured, not
    counted in rows."""
    return p.shared and p.ring.control.lighter_elsewhere(p.w)


def _measure(p: Producer, row: Row, t0: float, steps: int) -> None:
    """Fold a run's seconds per step into the row's cost (a moving average; a stream's open counts too)."""
    n = p.steps - steps
    if n:
        per_step = (time.perf_counter() - t0) / n
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
