"""Where every row stands in each batch, planned from the streams' lengths: the schedule a filler follows.

The claims follow from the lengths (``scheduled.claims.ClaimOrder``: tickets in canonical key order, a row claiming
again where its stream ends, or at the next batch under "pad"); a length not known is found by the filler's probe
as the plan reads the stream into its batch (``claims.Probe``). ``Schedule`` keeps every row's state as arrays
and turns each batch into a ``BatchRuns``: the rows one stream covers for the whole batch, as arrays, and the few
rows that cross a stream's end, as runs. A broken promise (a stream ends early) changes what is written, not the plan.

Every producer computes the same plans, so batch k's content is a pure function of the source, the loader's
settings, the epoch and k: the same for any number of workers and any timing.
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN, ClaimOrder, Turns, next_claim_step, stream_end
from streamcli.scheduled.crossings import MANY_CROSSINGS, SimpleCrossings
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.open_rows import Probe, Reads
from streamcli.scheduled.plans import BatchRuns as BatchRuns  # (re-exported: fillers import plans from here)
from streamcli.scheduled.plans import Opening
from streamcli.scheduled.plans import Run as Run
from streamcli.scheduled.steady import FOREIGN as FOREIGN
from streamcli.scheduled.steady import SteadyStretch

# A row's state is its cursor's (``RowPhase``): the schedule keeps the very value the cursor after a batch holds.
# ``SHORT`` here means "padding until ``claim_q``": a stream that has ended is ``SHORT`` until its row's claim
# (at once under "pack", at the next batch under "pad"), so only a resumed short row ends a batch ``SHORT``. A
# stream that falls short of its promise stays ``LIVE`` in the plan: its filler pads it and writes its cursor
# ``SHORT`` (``fills.flags.write_summary``).
LIVE, SHORT, IDLE, DRY, FOLLOW = (
    int(s) for s in (RowPhase.LIVE, RowPhase.SHORT, RowPhase.IDLE, RowPhase.DRY, RowPhase.FOLLOW)
)  # ints: quicker
_COLUMNS = ("state", "pos", "stop", "item", "replay", "expect", "seg_end", "claim_q")


class Schedule(SimpleCrossings, SteadyStretch):
    """Every row's state as arrays, advanced one batch at a time (``next_plan``), from an epoch's start or a
    resumed position: the ring's tables ``order`` (item, first step, open-ended, the item's promised length per
    stream) and ``start`` (the row cursors at batch ``first``).

    A producer that writes only the rows ``lo .. hi-1`` of each batch (``rows``: a worker reading iterator
    streams, which stay in its process) plans only those: the claims are made for every row, in the one order
    all producers share, and the rest is planned for its rows alone, numbered from 0 as if the batch held no
    others. A producer that owns a changing set of rows (``owned``, a mask over every row) plans those only
    (``scheduled.handed``)."""

    def __init__(
        self,
        order: np.ndarray,
        start: np.ndarray,
        first: int,
        tickets: int,
        *,
        T: int,
        pack: bool,
        segment: int,
        restream: bool,
        rows: tuple[int, int] | None = None,
        turns: Turns | None = None,
        owned: np.ndarray | None = None,
    ) -> None:
        self.lo, hi = rows or (0, len(start))
        self.T, self.B, self.B_all, self.pack, self.segment = T, hi - self.lo, len(start), pack, segment
        self.order = order
        if owned is None and rows is not None:  # (the claims are made for every row, planned for these)
            owned = np.zeros(len(start), bool)
            owned[self.lo : hi] = True
        self.claim_order = ClaimOrder.of_ring(
            order, start, first, tickets, T=T, pack=pack, segment=segment, restream=restream, turns=turns, owned=owned
        )
        self.k = first
        B, q0 = self.B, first * T
        start = start[self.lo : hi]
        # Every row's state, one row of this table each (so that a crossing row reads and writes it in one call);
        # the names below are its columns.
        self._bind(np.zeros((B, len(_COLUMNS)), np.int64))
        self.foreign = 0  # rows planned elsewhere (``owned``)
        for b, cursor in enumerate(start.tolist()):
            self._set_row(b, cursor, q0)
            if owned is not None and rows is None and not owned[b]:
                self.state[b], self.foreign = FOREIGN, self.foreign + 1

    def _bind(self, table: np.ndarray) -> None:
        self.table = table
        (self.state, self.pos, self.stop, self.item, self.replay, self.expect, self.seg_end, self.claim_q) = (
            table[:, i] for i in range(len(_COLUMNS))
        )

    def _set_row(self, b: int, cursor: list[int], q0: int) -> None:
        """Row ``b``'s state from its cursor at epoch step ``q0`` (an epoch's start, a resume, a row adopted)."""
        item, pos, state, flags = cursor
        segment = self.segment
        self.table[b] = (IDLE, pos, 0, item, (flags & _cursor.REPLAYED) != 0, -(flags & _cursor.OPEN_ENDED != 0), 0, q0)
        if state == DRY:
            self.state[b] = DRY
        elif state == FOLLOW:  # the item's next segment starts at ``pos`` (``open_rows``)
            self.state[b], self.stop[b], self.seg_end[b] = FOLLOW, pos + OPEN, pos
        elif state in (LIVE, SHORT):
            length = self.claim_order.item_length(item)
            end = stream_end(pos, length, segment) if length >= 0 else pos + OPEN  # (unknown: open)
            self.stop[b], self.expect[b] = end, length
            self.seg_end[b] = ((pos - 1) // segment + 1) * segment if segment else -1
            self.claim_q[b] = next_claim_step(q0, end - pos, self.T, self.pack)
            self.state[b] = state

    def next_plan(self, probe: Probe | None = None) -> BatchRuns:
        """The plan of the next batch; the rows' state moves past it. ``probe`` reads streams of unknown length."""
        opening = self.open_batch(probe)
        self.make_claims(opening)
        return self.close_batch(opening)

    def open_batch(self, probe: Probe | None = None) -> Opening:
        """Begin the next batch's plan: its open rows are read through it (``open_rows``)."""
        q0 = self.k * self.T
        reads = self._reads = None if probe is None else Reads(probe, q0, self.T, self.pack, self.segment)
        cols = (self.state, self.pos, self.stop, self.item, self.seg_end, self.claim_q)
        opened = [] if reads is None else reads.extend(self.claim_order, self.lo, cols)
        opener = None if reads is None else reads.opener(self.order, self.lo)
        return Opening([], opened, opener, (self.k + 1) * self.T * self.B_all)

    def make_claims(self, opening: Opening, wait: bool = True) -> bool:
        """Make the batch's claims in key order; without ``wait``, stop before one whose turn has not come (False:
        call again)."""
        order_of_claims, got, lo, B, B_all = self.claim_order, opening.got, self.lo, self.B, self.B_all
        while (key := order_of_claims.next_key()) < opening.limit:
            if not wait and not order_of_claims.ready(key):
                return False
            key, b, c = order_of_claims.advance(opening.opener)
            if lo <= b < lo + B:
                got.append((b - lo, key // B_all, c.first, c.n, c.dry, c.steps))
        return True

    def close_batch(self, opening: Opening) -> BatchRuns:
        """The batch's plan once its claims are made; the rows' state moves past it."""
        if self.left > 0 and not opening.got and not opening.opened:
            return self._steady()  # (``scheduled.steady``)
        plan = self._close(opening)
        self._measure()
        return plan

    def _close(self, opening: Opening) -> BatchRuns:
        T, B, k = self.T, self.B, self.k
        q0, q1 = k * T, (k + 1) * T
        claims = np.zeros(B, np.int64)
        dry = np.zeros(B, np.int64)
        got, opened = opening.got, opening.opened
        state, pos = self.state, self.pos
        live = state == LIVE
        whole_mask = live & (self.stop - pos >= T)
        if opened:
            whole_mask[opened] = False  # (read already: planned from what was read, ``_cross``)
        wait_all = (state == SHORT) & (self.claim_q >= q1)
        dry_all = state == DRY
        crossing = ~(whole_mask | wait_all | dry_all)
        if self.foreign:
            crossing &= state != FOREIGN
        claimed = np.array(got, np.int64).reshape(-1, 6)
        crossing[claimed[:, 0]] = True
        whole = np.flatnonzero(whole_mask)
        out = BatchRuns(
            k=k,
            whole=whole,
            item=self.item[whole],
            pos=pos[whole],
            replay=self.replay[whole] != 0,
            stop=self.stop[whole],
            expect=self.expect[whole],
            seg_end=self.seg_end[whole],
            runs=[],
            pads=[],
            cursors=np.empty((B, _cursor.WIDTH), np.int64),
            claims=claims,
            dry=dry,
        )
        pads = out.pads
        for b in np.flatnonzero((wait_all | dry_all) & ~crossing).tolist():
            pads.append((b, 0, T))
        pos[whole] += T
        pos[wait_all & (self.claim_q > q1) & ~crossing] += T  # padding on: the position counts on
        ended = whole[self.stop[whole] == pos[whole]]
        state[ended] = SHORT
        rest = np.flatnonzero(crossing)
        if len(rest) >= MANY_CROSSINGS:
            rest = self._cross_simply(crossing, claimed, q0, out)
        if len(rest):
            by_row: dict[int, list[tuple[int, ...]]] = {}  # row -> its claims (step, first, n, dry, steps)
            for b, *claim in got:
                by_row.setdefault(b, []).append(tuple(claim))
            for b in rest.tolist():
                self._cross(b, q0, by_row.get(b, []), out)
        # Rows waiting for a claim at the next batch's first step are free now.
        state[(state == SHORT) & (self.claim_q == q1)] = IDLE
        cur = out.cursors
        cur[:, _cursor.ITEM] = self.item
        cur[:, _cursor.POS] = pos
        cur[:, _cursor.STATE] = state
        cur[:, _cursor.FLAGS] = self.replay * _cursor.REPLAYED
        if self.segment:  # an item of unknown length cut into segments: its row says so until its next claim
            cur[:, _cursor.FLAGS] += (self.expect < 0) * _cursor.OPEN_ENDED
        self.k = k + 1
        return out

    def _cross(self, b: int, q0: int, row_claims: list[tuple[int, ...]], out: BatchRuns) -> None:
        """Row ``b``'s runs and padding in a batch where it does not read one stream throughout (the row's state is
        read into plain values once, and written back at the end)."""
        T, claim_order, order = self.T, self.claim_order, self.order
        state, pos, stop, item, replay, expect, seg_end, claim_q = self.table[b].tolist()
        replay, fresh = replay != 0, False  # a stream is fresh only from its claim to its first run, in one batch
        runs, pads = out.runs, out.pads
        t, c = 0, 0
        while t < T:
            if (state == LIVE and stop >= OPEN) or state == FOLLOW:  # what the reads found (``open_rows``)
                assert self._reads is not None
                t, pos, state, stop, seg_end, claim_q = self._reads.plan(
                    b, q0 + t, runs, pads, item, replay, stop, expect
                )
            elif state == LIVE:
                n = min(stop - pos, T - t)
                runs.append((b, t, n, item, pos, replay, fresh, stop, expect, seg_end))
                fresh = False
                pos += n
                t += n
                if pos == stop:
                    state = SHORT
            elif state == SHORT:
                claim_t = claim_q - q0
                e = min(T, claim_t)
                if e > t:
                    pads.append((b, t, e))
                    if claim_t > T:
                        pos += T - t  # still padding at the batch's end: the position counts on
                t = e
                if claim_t <= T:
                    state = IDLE
            elif state == IDLE:  # its claim (``write._claim_planned``): tickets first .. first + count - 1
                step, first, count, is_dry, steps = row_claims[c]
                c += 1
                assert step == q0 + t, (b, step, q0, t)
                out.claims[b] += count
                taken = first + count - 1 - is_dry  # the stream it takes (dry: the last empty one it passed)
                if taken >= first:
                    item, start, _, expect = order[taken % claim_order.n].tolist()
                    pos, replay = start, taken >= claim_order.n
                if is_dry:
                    state = DRY
                    out.dry[b] += 1
                    continue
                stop = start + (steps if steps >= 0 else OPEN)  # (not known: read from its claim on, ``open_rows``)
                seg_end = (start // self.segment + 1) * self.segment if self.segment else -1  # (mid-segment: replan)
                claim_q = next_claim_step(step, steps, T, self.pack)
                fresh, state = True, LIVE
            else:  # DRY
                pads.append((b, t, T))
                t = T
        self.table[b] = (state, pos, stop, item, replay, expect, seg_end, claim_q)
