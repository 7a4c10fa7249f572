"""How a producer writes a row: a claim of its next stream, then runs of steps into the batch's slot.

A row's steps of one batch are one run: the copy per step (or per block, for sources with
``block_steps = True``) with its shape and dtype check (its slow path and errors: ``fills.checks``); the flags,
cursors and completion of a piece of work are written at its end (``fills.claimed.notes``). The row reads its stream one
step ahead, so it knows before the batch ends whether the stream goes on, and can announce its next possible claim
(``Control.set_claim``). After a row's last step in a batch its cursor goes into the slot (``scheduled.cursor``). A
row resumed or moved mid-stream reopens its stream with ``open(item, start=pos)`` (``promise_again`` restores
what the row that opened it knew), so nothing is replayed. A length that ``length()`` promised is checked, never
trusted: a stream that runs past it is cut there, one that ends early leaves its row padding until its planned
claim, and either is reported (``Skip``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from streamcli.errors import SourceError, StepSpecError
from streamcli.fills import checks
from streamcli.fills.claimed.notes import SlotViews, pad, record
from streamcli.fills.claimed.rows import NO_END, Producer, Row
from streamcli.fills.spec import Skip
from streamcli.lives.control import NEVER
from streamcli.lives.ring import CLAIMS, DRY, LIVE, VALID
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import ClaimPlan, next_claim_step, stream_end
from streamcli.source import Step, item_name

_FINE_S = 20e-6  # seconds per step from which a row marks every step it reads (``_copy``)
_SOURCE_ERRORS = (Exception, SystemExit)  # ``sys.exit()`` inside a source is an error of the source too
_END = object()  # the look-ahead found the stream over
_BLK = object()  # the look-ahead step lies in the row's current block


def close_rows(rows: Any) -> None:
    """Close the streams of ``rows`` (an epoch ends, or the producer stops)."""
    for row in list(rows):
        close(row)


def promise_again(p: Producer, row: Row) -> None:
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


def slot_views(p: Producer, k: int) -> SlotViews:
    """The views of batch ``k``'s slot (handed out), made once per slot and kept."""
    if p.last[0] == k and p.last[1] is not None:
        return p.last[1]
    slot = p.ring.control.slot_of(k)
    got = p.slots.get(slot)
    if got is None:
        got = SlotViews.of(p.ring.tb_slots[slot], p.spec)
        p.slots[slot] = got
    p.last = (k, got)
    return got


def take(p: Producer, b: int, held: np.ndarray, q: int) -> None:
    """Claim the next stream for waiting row ``b`` at epoch position ``q`` (its turn has come), then run it."""
    item, pos, _, flags = held.tolist()
    row = Row(b, item=item, pos=pos, q=q, replay=bool(flags & _cursor.REPLAYED))
    row.open_ended = bool(flags & _cursor.OPEN_ENDED)
    T = p.T
    k = q // T
    if q % T:  # released mid-batch: the counts of this batch so far were left in the slot
        row.tally = slot_views(p, k).summary[b].tolist()
    p.rows[b] = row
    _claim(p, row, k)
    _publish(p, row)
    run(p, row, k)


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


def run(p: Producer, row: Row, k: int) -> None:
    """Write ``row``'s steps of batch ``k`` from ``row.q`` on, until the batch ends or its stream does (then the
    row is released for its next claim)."""
    T = p.T
    v = slot_views(p, k)
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
    mark = p.mark
    mark[0], mark[1] = row.item, pos0 + 1  # the first step this run reads (``pos0`` was read ahead)
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
        # Slow steps mark each step read (``Control.mark_of``): ``timeout=`` counts seconds without a step, and a
        # death names its step. Fast ones (under ``_FINE_S`` a step when last timed, every 8th batch) only mark each
        # run: the store would cost a tenth of the tightest loop, and their runs end long before any timeout.
        timed = row.fine or not k & 7
        each, started = claims or row.fine, time.perf_counter() if timed else 0.0
        beat, off = mark, pos0 - t0 + 1
        name, shape, dtype, col = cols[0]
        while True:
            try:
                if single:  # the common source of one field: no inner loop
                    a = nxt[name]
                    if type(a) is not ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                        row.pos = pos0 + t - t0
                        a = _step_field(p, row, nxt, name, shape, dtype)
                    if cells:
                        col[t][...] = a
                    else:
                        col[t] = a
                else:
                    for name, shape, dtype, col in cols:
                        a = nxt[name]
                        if type(a) is not ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                            row.pos = pos0 + t - t0
                            a = _step_field(p, row, nxt, name, shape, dtype)
                        if cells:
                            col[t][...] = a
                        else:
                            col[t] = a
            except (KeyError, TypeError, IndexError):
                row.pos = pos0 + t - t0
                _step_field(p, row, nxt, name, shape, dtype)  # raises the precise error
                raise
            t += 1
            if t == t_stop:
                break
            try:
                nxt = next(it, _END)
            except _SOURCE_ERRORS as exc:
                row.pos = pos0 + t - t0
                _fail(p, row, k, exc, "reading")
                nxt, row.expect = _END, -1  # skipped, not short
            if nxt is _END:
                break
            if each:
                beat[1] = t + off  # the next step to read
                if claims:
                    control.set_claim(b, (q0 + t - t0 + 1) * B + b)
        n = t - t0
        if timed:
            row.fine = n < 2 or time.perf_counter() - started > _FINE_S * n
    p.out.runs.append((b, t0, n, row.item, pos0, row.replay, row.fresh))  # flags are written by ``flush``
    row.fresh = False
    pos = row.pos = pos0 + n
    row.tally[VALID] += n
    p.steps += n
    if pos == stop:  # the run ended at a limit, not at the stream's end: decide what comes next
        if pos == row.end and not row.open_ended:
            close(row)  # the segment is over; the item's next one is a stream of its own
            return t0 + n
        nxt = _look(p, row, k)
    row.nxt = nxt
    if nxt is _END:
        if row.expect >= 0 and pos != row.expect:
            _mismatch(p, row, k, f"ended after {pos} steps")
        close(row)
    elif pos == row.expect:  # it goes on past the promised length: cut it there, as len() counted
        _mismatch(p, row, k, "goes on past them")
        close(row)
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
        row.end = start + segment if segment else NO_END
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
        close(row)
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
    row.end = start + p.plan.segment if p.plan.segment else NO_END
    row.expect = length
    row.blk, row.j = None, 0
    row.claim_q = next_claim_step(row.q, plan.steps_of(ticket), p.T, p.pack)
    row.it = _open(p, row, k)
    row.nxt = _END if row.it is None else _look(p, row, k)
    if row.nxt is _END:
        close(row)
        if row.expect >= 0:  # not a skipped failure (that is reported already)
            _mismatch(p, row, k, f"ended after {row.pos} steps")
        row.short = True


def _open(p: Producer, row: Row, k: int) -> Iterator[Step] | None:
    _mark(p, row)
    try:
        it = iter(p.source.open(p.items[row.item], row.pos))
    except _SOURCE_ERRORS as exc:
        _fail(p, row, k, exc, "opening")
        row.expect = -1  # skipped, not short
        return None
    return it if p.tf is None else p.tf.wrap(it, row.item, row.pos, p.blocks)


def _reopen(p: Producer, row: Row, k: int) -> None:
    """Continue a resumed row's stream at ``row.pos``: ``open(item, start=pos)``, nothing replayed."""
    row.reopen = False
    row.it = _open(p, row, k)
    row.nxt = _END if row.it is None else _look(p, row, k)
    if row.nxt is _END:
        close(row)  # the stream ended exactly at the cut (or failed): the row claims at its next chance


def _mark(p: Producer, row: Row) -> None:
    """Publish the step the producer is about to read (``Control.mark_of``)."""
    mark = p.mark
    mark[0], mark[1] = row.item, row.pos


def _look(p: Producer, row: Row, k: int) -> Any:
    """The row's look-ahead: the next step, ``_BLK`` when it is ``row.blk[...][row.j]``, or ``_END``."""
    assert row.it is not None
    if p.blocks:
        if row.blk is not None and row.j < len(row.blk[0]):
            return _BLK
        _mark(p, row)
        try:
            block: Any = next(row.it, _END)
        except _SOURCE_ERRORS as exc:
            _fail(p, row, k, exc, "reading")
            row.expect = -1  # skipped, not short
            return _END
        if block is _END:
            return _END
        row.blk, row.j = checks.block_arrays(block, p.spec, p.plan.fields, lambda: _where(p, row, "block at step")), 0
        return _BLK
    _mark(p, row)
    try:
        return next(row.it, _END)
    except _SOURCE_ERRORS as exc:
        _fail(p, row, k, exc, "reading")
        row.expect = -1  # skipped, not short
        return _END


def _fail(p: Producer, row: Row, k: int, exc: BaseException, doing: str) -> None:
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


def _step_field(p: Producer, row: Row, step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The slow path of the per-step check (``checks.step_field``): convert scalars and lists, or raise."""
    return checks.step_field(step, name, shape, dtype, lambda: _where(p, row, "step"))


def _where(p: Producer, row: Row, what: str) -> str:
    """Where a step broke the contract, for its error: "plugin ... item ... step N" (or "block at step N")."""
    return f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} {what} {row.pos}"


def close(row: Row) -> None:
    it, row.it, row.nxt, row.follow, row.blk = row.it, None, None, False, None
    close = getattr(it, "close", None)
    if callable(close):
        try:
            close()  # release generators' files promptly
        except Exception:
            pass
