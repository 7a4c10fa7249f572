"""How a row of the claimed path takes its next stream and reads it: the claim in canonical key order, the
open (or reopen, for a resumed or moved row), the one-step look-ahead that tells whether the stream goes on, and
the report of a source that fails or breaks the length it promised.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcli.fills import checks, opened
from streamcli.fills.claimed.rows import NO_END, Producer, Row
from streamcli.fills.faults import SOURCE_ERRORS, Faults
from streamcli.shared.control import NEVER
from streamcli.shared.ring import Summary
from streamcli.source import Step, close_stream

_CLAIMS, _DRY = int(Summary.CLAIMS), int(Summary.DRY)  # plain ints: read for every claim

END = object()  # the look-ahead found the stream over
BLK = object()  # the look-ahead step lies in the row's current block


def close_rows(rows: Any) -> None:
    """Close the streams of ``rows`` (an epoch ends, or the producer stops)."""
    for row in list(rows):
        close(row)


def promise_again(p: Producer, row: Row) -> None:
    """A row that reopens its stream mid-way (resumed, or moved to another producer) checks the length that
    ``length()`` promised, as the row that opened it did: a stream that runs past it is cut there either way."""
    if not (row.reopen or row.short):
        return
    row.expect = p.ring.control.promised_length(row.item)


def publish(p: Producer, row: Row) -> None:
    """Announce the row's next possible claim: after the looked-ahead step, which exists and goes at ``row.q``."""
    key = NEVER if row.done else (row.claim_q if row.short else after_next_step(p, row)) * p.B + row.b
    p.ring.control.set_claim(row.b, key)


def pad_to_promise(p: Producer, row: Row, q: int) -> bool:
    """The row's stream is over (closed) at epoch step ``q``, before the steps its item promised (it ended early,
    or failed under on_error="skip"): the row pads until its claim as the lengths plan it (``scheduled.schedule``),
    so that batches do not depend on whether rows are claimed at run time. False if nothing was promised past
    ``row.pos``."""
    if row.expect < 0:
        return False
    left = row.promised_stop - row.pos
    if left <= 0:
        return False
    row.short = True
    row.claim_q = q + left if p.pack else ((q + left - 1) // p.T + 1) * p.T
    publish(p, row)
    return True


def after_next_step(p: Producer, row: Row) -> int:
    """The earliest epoch step of the row's next claim, after its step at ``row.q``."""
    return row.q + 1 if p.pack else (row.q // p.T + 1) * p.T


def claim(p: Producer, row: Row, k: int) -> None:
    """Give ``row`` its next stream: its turn has come (no row can claim before it).

    A stream whose item promised a length that covers its start has a first step, so the row announces its next
    possible claim as soon as it holds the ticket: the next claim need not wait for this stream's open (a video
    seek can be slow). Should the promise fail (the stream is empty, or fails to open under
    on_error="skip"), the row keeps that announcement: it is padding until then (``row.short``)."""
    control = p.ring.control
    n = control.num_streams
    segment = p.fill_spec.segment
    empty_replays = 0
    while True:
        with p.lock:  # the lock orders the ticket counter between processes
            ticket = control.take_ticket()
        row.tally[_CLAIMS] += 1
        replay = ticket >= n
        if replay and (p.fill_spec.epoch_end != "restream" or n == 0 or empty_replays >= n):
            row.done = True
            row.tally[_DRY] += 1
            return
        item, start, open_ended, length = control.stream(ticket)
        row.item, row.pos, row.replay, row.fresh, row.open_ended = item, start, replay, True, open_ended
        row.end = start + segment if segment else NO_END
        row.expect = length  # the item's promised length (-1: none), whichever segment of it this stream is
        row.skipped = False
        row.blk, row.j = None, 0
        if 0 <= length <= start:  # promised empty: nothing to open, take the next ticket at the same position
            empty_replays += replay
            continue
        promised = length > start
        if promised:
            publish(p, row)
        row.it = open_stream(p, row, k)
        row.nxt = END if row.it is None else look(p, row, k)
        if row.nxt is not END:
            return
        close(row)
        if promised:
            if not row.skipped:  # a skipped failure is reported already
                mismatch(p, row, k, "ended after 0 steps")
            pad_to_promise(p, row, row.q)
            return
        empty_replays += replay  # an empty (or skipped) stream: take the next ticket at the same position


def open_stream(p: Producer, row: Row, k: int) -> Iterator[Step] | None:
    it = opened.open_stream(p.source, faults(p, k), p.mark, p.tf, p.blocks, row.item, row.pos)
    if it is None:
        row.skipped = True  # reported as skipped, not as a length mismatch
    return it


def reopen(p: Producer, row: Row, k: int) -> None:
    """Continue a resumed row's stream at ``row.pos``: ``open(item, start=pos)``, nothing replayed."""
    row.reopen = False
    row.it = open_stream(p, row, k)
    row.nxt = END if row.it is None else look(p, row, k)
    if row.nxt is END:
        close(row)  # the stream ended exactly at the cut (or failed): the row claims at its next chance


def mark(p: Producer, row: Row) -> None:
    """Publish the step the producer is about to read (``Control.mark_of``)."""
    mark = p.mark
    mark[0], mark[1] = row.item, row.pos


def look(p: Producer, row: Row, k: int) -> Any:
    """The row's look-ahead: the next step, ``BLK`` when it is ``row.blk[...][row.j]``, or ``END``."""
    assert row.it is not None
    if p.blocks:
        if row.blk is not None and row.j < len(row.blk[0]):
            return BLK
        mark(p, row)
        try:
            block: Any = next(row.it, END)
        except SOURCE_ERRORS as exc:
            fail(p, row, k, exc, "reading")
            row.skipped = True  # reported as skipped, not as a length mismatch
            return END
        if block is END:
            return END
        row.blk, row.j = (
            checks.block_arrays(block, p.spec, p.fill_spec.fields, lambda: where(p, row, "block at step")),
            0,
        )
        return BLK
    mark(p, row)
    try:
        return next(row.it, END)
    except SOURCE_ERRORS as exc:
        fail(p, row, k, exc, "reading")
        row.skipped = True  # reported as skipped, not as a length mismatch
        return END


def faults(p: Producer, k: int) -> Faults:
    """The reporting context of producer ``p`` at batch ``k`` (``fills.faults``): its messages are built there."""
    return Faults(p.fill_spec.plugin, p.source, p.items, p.fill_spec.on_error, p.on_skip, k)


def fail(p: Producer, row: Row, k: int, exc: BaseException, doing: str) -> None:
    """The source raised ``exc`` while ``doing`` the row's stream: skip it, or raise (``Faults.fail``)."""
    faults(p, k).fail(row.item, row.pos, exc, doing)


def mismatch(p: Producer, row: Row, k: int, what: str) -> None:
    """The row's stream broke the length ``length()`` promised (``Faults.mismatch``)."""
    faults(p, k).mismatch(row.item, row.pos, row.expect, what)


def where(p: Producer, row: Row, what: str) -> str:
    """Where a step broke the contract, for its error: "plugin ... item ... step N" (or "block at step N")."""
    return faults(p, 0).where(row.item, row.pos, what)


def close(row: Row) -> None:
    it, row.it, row.nxt, row.follow, row.blk = row.it, None, None, False, None
    close_stream(it)
