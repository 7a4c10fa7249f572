"""Rows reading a stream of unknown length: the schedule learns where it ends as the stream is read.

A length that is not known is a lower bound that grows as the stream is read. Planning a batch, the schedule has
each such row's stream read through the batch (``read``, by the filler's ``Probe``, which writes the steps into
the batch's slot and looks one step ahead): the stream ends there, and its row's next claim is known (its key
enters the claim order), or it goes on past the batch. A segment of an item of unknown length is a stop that grows
one segment at a time: at its end, the look-ahead says whether the next segment follows on the same row
(``FOLLOW``: at once under "pack", at the next batch under "pad") or the item is over. What was read is kept
(``Found``) for the schedule's state machine to plan the row's runs from (``scheduled.schedule``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.scheduled.claims import OPEN, ClaimOrder, Opener
from streamcli.scheduled.cursor import RowPhase

Probe = Callable[[int, int, int, int, int, bool], int]
"""Reads a stream of unknown length into the batch being planned, ``(row, item, pos, batch step, steps, open)``
(``open``: a new stream, opened at ``pos``; else the row's stream goes on): the steps read if the stream ended
within them (it looks one step ahead), else ``OPEN``."""
_LIVE, _IDLE, _FOLLOW, _SHORT = (int(s) for s in (RowPhase.LIVE, RowPhase.IDLE, RowPhase.FOLLOW, RowPhase.SHORT))
EMPTY = -1  # an opener's answer: the stream claimed has no step (the row takes the next ticket at the same key)


@dataclass
class Found:
    """Row's stream of unknown length in one batch, from batch step ``t0``: its runs ``(t0, n, pos, fresh)``, its
    padding, and where it stands after them: at batch step ``t``, position ``pos``, in ``state`` (``LIVE``: it
    goes on past the batch; ``FOLLOW``: its next segment starts at the next batch; ``IDLE``/``SHORT``: it ended,
    and the row claims, or pads until its claim, at epoch step ``claim_q``)."""

    t: int
    pos: int
    state: int
    seg_end: int
    claim_q: int = -1
    runs: list[tuple[int, int, int, bool]] = field(default_factory=list)
    pads: list[tuple[int, int]] = field(default_factory=list)


def read(
    probe: Probe,
    b: int,
    item: int,
    pos: int,
    seg_end: int,
    t: int,
    *,
    q0: int,
    T: int,
    pack: bool,
    segment: int,
    follow: bool = False,
    claim: bool = False,
) -> Found:
    """Row ``b``'s stream (``item`` at ``pos``, its segment ending at ``seg_end``) from batch step ``t`` of the
    batch at epoch step ``q0`` to its end or the batch's: ``follow``, the row starts the item's next segment;
    ``claim``, the row has just taken the stream (the reader opens it)."""
    state = _FOLLOW if follow else _LIVE
    out = Found(t, pos, state, seg_end)
    fresh = claim
    while t < T:
        if state == _FOLLOW:
            if t and not pack:  # "pad": the next segment starts at the next batch
                out.pads.append((t, T))
                t = T
                break
            seg_end, fresh, state = pos + segment, True, _LIVE
        n_max = min(T - t, seg_end - pos) if segment else T - t
        got = probe(b, item, pos, t, n_max, claim)
        claim = False
        n = n_max if got >= OPEN else got
        if n:
            out.runs.append((t, n, pos, fresh))
        fresh, pos, t = False, pos + n, t + n
        if got < OPEN:
            state, out.claim_q = ended(t, q0, T, pack)
            break
        if segment and pos == seg_end:
            state = _FOLLOW
    out.t, out.pos, out.state, out.seg_end = t, pos, state, seg_end
    return out


def ended(t: int, q0: int, T: int, pack: bool) -> tuple[int, int]:
    """(state, next claim step) of a row whose stream ended at batch step ``t``: it claims there ("pack") or at
    the next batch ("pad", padding until then)."""
    claim_q = q0 + t if pack or not t else q0 + T
    return (_IDLE if claim_q == q0 + t else _SHORT), claim_q


def opened(found: Found) -> int:
    """What ``ClaimOrder.advance`` learns from a claim's ``Found``: ``EMPTY``, the row's next claim step, or
    ``OPEN`` (not known before a later batch)."""
    if found.state == _IDLE or found.state == _SHORT:
        return found.claim_q if found.runs else EMPTY
    return OPEN


class Reads:
    """The reads of one batch's open rows, by (row, epoch step where the read starts): the rows open at the
    batch's start (``extend``), and each claim of a stream of unknown length (``opener``)."""

    def __init__(self, probe: Probe, q0: int, T: int, pack: bool, segment: int) -> None:
        self.probe, self.q0, self.T, self.pack, self.segment = probe, q0, T, pack, segment
        self.found: dict[tuple[int, int], Found] = {}

    def read(self, b: int, item: int, pos: int, seg_end: int, t: int, follow: bool, claim: bool) -> Found:
        got = self.found[b, self.q0 + t] = read(
            self.probe,
            b,
            item,
            pos,
            seg_end,
            t,
            q0=self.q0,
            T=self.T,
            pack=self.pack,
            segment=self.segment,
            follow=follow,
            claim=claim,
        )
        return got

    def plan(
        self,
        b: int,
        q: int,
        runs: list[Any],
        pads: list[tuple[int, int, int]],
        item: int,
        replay: int,
        stop: int,
        expect: int,
    ) -> tuple[int, int, int, int, int, int]:
        """Row ``b``'s runs and padding as read from epoch step ``q`` (``Schedule._cross``), and where the row
        stands after them: (batch step, position, state, stop, segment end, next claim step)."""
        f = self.found.pop((b, q))
        runs.extend((b, t0, n, item, p, replay != 0, fresh, stop, expect, f.seg_end) for t0, n, p, fresh in f.runs)
        pads.extend((b, t0, t1) for t0, t1 in f.pads)
        over = f.state == _IDLE or f.state == _SHORT
        return f.t, f.pos, f.state, f.pos if over else stop, f.seg_end, f.claim_q

    def extend(self, claims: ClaimOrder, lo: int, cols: tuple[np.ndarray, ...]) -> list[int]:
        """Read the rows open at the batch's start through it (``cols``: the schedule's state, pos, stop, item,
        seg_end and claim_q); where one ends, its next claim enters ``claims``. Returns the rows whose reads
        ``plan`` gives: not those that go on through the batch as one stream (the plan's whole rows), nor one
        whose stream was over at once (resumed at its end: it claims at the batch's start)."""
        state, pos, stop, item, seg_end, claim_q = cols
        T, q0, segment = self.T, self.q0, self.segment
        rows = np.flatnonzero(((state == _LIVE) & (stop >= OPEN)) | (state == _FOLLOW))
        read = []
        cells = (c[rows].tolist() for c in (state, pos, item, seg_end))
        for b, s, p, i, e in zip(rows.tolist(), *cells, strict=True):
            if s == _LIVE and (not segment or e - p > T):  # the usual row: one read, through the batch if it goes on
                got = self.probe(b, i, p, 0, T, False)
                if got >= OPEN:
                    claims.read_through(b + lo, q0)
                    continue
                s, claim = ended(got, q0, T, self.pack)
                f = self.found[b, q0] = Found(got, p + got, s, e, claim, [(0, got, p, False)] if got else [])
            else:
                f = self.read(b, i, p, e, 0, s == _FOLLOW, False)
            if f.claim_q < 0:
                claims.read_through(b + lo, q0)
                read.append(b)
                continue
            claims.close(b + lo, f.claim_q)
            if f.t == 0:  # over at once: its claim's read goes by the same key
                del self.found[b, q0]
                state[b], stop[b], claim_q[b] = _IDLE, p, q0
            else:
                read.append(b)
        return read

    def opener(self, order: np.ndarray, lo: int) -> Opener:
        """``ClaimOrder.advance``'s opener: the claiming row reads its new stream from its claim on."""
        n, segment = len(order), self.segment

        def open_ticket(b: int, ticket: int, step: int) -> int:
            item, start = order[ticket % n, :2].tolist()
            seg_end = start + segment if segment else -1
            return opened(self.read(b - lo, item, start, seg_end, step - self.q0, False, True))

        return open_ticket
