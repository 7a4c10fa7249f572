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
from typing import Any

import numpy as np

from streamcli.fills import checks
from streamcli.fills.claimed.claim import (
    END,
    claim,
    close,
    fail,
    look,
    mismatch,
    pad_to_promise,
    publish,
    reopen,
    where,
)
from streamcli.fills.claimed.notes import SlotViews, pad, record
from streamcli.fills.claimed.rows import Producer, Row
from streamcli.fills.faults import SOURCE_ERRORS
from streamcli.scheduled import cursor as _cursor
from streamcli.shared.ring import Summary

_VALID, _LIVE = int(Summary.VALID), int(Summary.LIVE)  # plain ints: read for every run

_FINE_S = 20e-6  # seconds per step from which a row marks every step it reads (``_copy``)


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
        row.tally = slot_views(p, k).views.summary[b].tolist()
    p.rows[b] = row
    claim(p, row, k)
    publish(p, row)
    run(p, row, k)


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
        reopen(p, row, k)
        if row.it is None:
            return _ended(p, row, v, k, t)
        publish(p, row)
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
            row.follow, row.fresh, row.end = False, True, row.pos + p.fill_spec.segment
        t = _copy(p, row, v, k, t)
        if row.it is None:
            return _ended(p, row, v, k, t)
        if not row.follow:
            break  # the batch is full
    row.q = (k + 1) * T
    publish(p, row)
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
    claims = p.shared and p.pack  # let other rows' claims go as this run reads ahead
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
            nxt = look(p, row, k)
            if nxt is END:
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
        # run: the store would be a large share of the tightest loop, and their runs end long before any timeout.
        timed = row.fine or not k & 7
        each, started = claims or row.fine, time.perf_counter() if timed else 0.0
        beat, off = mark, pos0 - t0 + 1
        name, shape, dtype, col = cols[0]
        while True:
            try:
                # The one-field branch repeats the loop's body on purpose: a loop of one field is per-step
                # Python work that the tightest sources notice.
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
                nxt = next(it, END)
            except SOURCE_ERRORS as exc:
                row.pos = pos0 + t - t0
                fail(p, row, k, exc, "reading")
                nxt, row.skipped = END, True  # reported as skipped, not as a length mismatch
            if nxt is END:
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
    row.tally[_VALID] += n
    p.steps += n
    if pos == stop:  # the run ended at a limit, not at the stream's end: decide what comes next
        if pos == row.end and not row.open_ended:
            close(row)  # the segment is over; the item's next one is a stream of its own
            return t0 + n
        nxt = look(p, row, k)
    row.nxt = nxt
    if nxt is END:
        if row.expect >= 0 and pos != row.expect and not row.skipped:
            mismatch(p, row, k, f"ended after {pos} steps")
        close(row)
    elif pos == row.expect:  # it goes on past the promised length: cut it there, as len() counted
        mismatch(p, row, k, "goes on past them")
        close(row)
    elif pos == row.end:
        row.follow = True
    return t0 + n


def _finish(p: Producer, row: Row, v: SlotViews, k: int, reading: bool = False) -> None:
    """Row ``row``'s batch ``k`` is written: its cursor and counts go into the slot, then it is counted done.
    ``reading``: the row counts as reading its stream although it is closed (``_wait_out``)."""
    row.tally[_LIVE] = (row.it is not None or reading) and not row.replay
    record(p.out, row.b, row.cursor(), row.tally)
    p.out.written.append(row.b)
    row.tally = [0, 0, 0, 0]


def _ended(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """The row's stream is over at batch step ``t``: the row is free for its next claim, or pads until the claim
    its promise plans (it ended early, or failed under on_error="skip")."""
    if pad_to_promise(p, row, k * p.T + t):
        return _wait_out(p, row, v, k, t)
    _release(p, row, v, k, t)


def _wait_out(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """Pad a row whose stream ended short of its promise, from batch step ``t`` until its next claim."""
    T = p.T
    stop = min(T, row.claim_q - k * T)
    pad(v, row.b, t, p.out, stop)
    # The position counts on through the promised steps, as if they were read: a resumed row knows where its claim is.
    row.pos = min(row.pos + stop - t, row.promised_stop)
    if k * T + stop == row.claim_q:  # the claim is due: the row is free
        row.short = False
        return _release(p, row, v, k, stop)
    row.q = (k + 1) * T
    # A stream that ran out exactly at the batch's end still counts as read: rows planned from the lengths find it
    # over only when the next batch reads it, and an epoch that restreams ends when no first stream is read.
    _finish(p, row, v, k, reading=t == T)


def _release(p: Producer, row: Row, v: SlotViews, k: int, t: int) -> None:
    """The row's stream is over at batch step ``t``: give the row up until its next claim, which is at the next
    step ("pack") or at the next batch ("pad", padding the rest of this one)."""
    T = p.T
    b = row.b
    if t and not p.pack:
        pad(v, b, t, p.out)
        t = T
    del p.rows[b]
    row.tally[_LIVE] = 0  # mid-batch, the next owner carries on counting this batch
    cursor = row.cursor()
    record(p.out, b, cursor, row.tally)
    written = k + 1 if t == T else k
    p.out.releases.append((b, (k * T + t) * p.B + b, written, cursor))


def _step_field(p: Producer, row: Row, step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The slow path of the per-step check (``checks.step_field``): convert scalars and lists, or raise."""
    return checks.step_field(step, name, shape, dtype, lambda: where(p, row, "step"))
