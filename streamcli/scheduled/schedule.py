"""Every row's next event (a claim or a stream's end) in one key order: the plan of each batch (``BatchRuns``).

A length not known is an open bound that reading raises (the filler's ``Probe``). A plan's cost follows the rows
that change; a broken promise changes what is written, not the plan. Batch k is a pure function of the source, the
settings, the epoch and k, so every producer computes the same plans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN, ClaimOrder, Turns, next_claim_step, stream_end
from streamcli.scheduled.crossings import COLUMNS, cross_many, read_on
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.plans import BatchRuns as BatchRuns  # (re-exported: fillers import plans from here)
from streamcli.scheduled.plans import Opening
from streamcli.scheduled.plans import Run as Run

# A row's state is its cursor's (``RowPhase``); a stream that falls short of its promise stays ``LIVE`` in the plan.
LIVE, SHORT, IDLE, DRY, FOLLOW = (
    int(s) for s in (RowPhase.LIVE, RowPhase.SHORT, RowPhase.IDLE, RowPhase.DRY, RowPhase.FOLLOW)
)  # ints: quicker
FOREIGN = -1  # a row another producer plans (``scheduled.handed``): no claim, no run, no cursor of it here
EMPTY = -1  # an opener's answer: the stream claimed has no step (the row takes the next ticket at the same key)
Probe = Callable[[int, int, int, int, int, bool], int]
"""``(row, item, pos, batch step, steps, open)``: reads an open stream into the batch being planned (``open``: opened
at ``pos``); the steps read if it ended within them, else ``OPEN``."""
Walk = list[Any]
"""A row's walk through a batch (``_walk``): ``[batch step, claims used, runs, pads, item, pos, state, stop, replay,
expect, seg_end, claim_q, fresh, opens]``."""


class Schedule:
    """Every row's state as a table, advanced a batch at a time (``next_plan``) from the ring's ``order`` table and
    the row cursors ``start`` at batch ``first``. Each row is filed under the batch of its next event (``due``); a
    batch walks those rows and the rows its claims and reads change (``_walk``), and every other row reads on, pads on
    or stays dry. ``rows``: the rows ``lo .. hi-1`` planned (every row's claims made); ``owned``: a mask of them."""

    EVENTS = True  # (tests turn it off: every row planned in every batch, to compare the plans)
    MANY = 48  # from this many changing rows in a batch, they are planned as arrays (``crossings``)

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
        self._bind(np.zeros((B, len(COLUMNS)), np.int64))
        self.due: dict[int, set[int]] = {}  # batch -> the rows with an event in it
        # What a row that changes nothing does in a batch, by state (FOREIGN first): (reads, pads, position counts on).
        self._kinds = np.zeros((max(LIVE, SHORT, IDLE, DRY, FOLLOW) + 2, 3), np.int64)
        self._kinds[LIVE + 1], self._kinds[SHORT + 1], self._kinds[DRY + 1] = (1, 0, T), (0, 1, T), (0, 1, 0)
        self._same: tuple[BatchRuns, np.ndarray] | None = None  # the plan's parts kept while no row changes
        self._probe: Probe | None = None  # the batch's reader of open bounds
        self._walks: dict[int, Walk] = {}  # the rows read before the batch's claims, where they stopped
        self._claims: list[tuple[int, ...]] = []  # the batch's claims: (row, step, first, count, dry, steps)
        self._got: dict[int, list[tuple[int, ...]]] = {}  # ... by row: those of ``_claims[:_seen]``
        self._seen = 0
        for b, cursor in enumerate(start.tolist()):
            self._set_row(b, cursor, q0)
            if owned is not None and rows is None and not owned[b]:
                self.state[b] = FOREIGN
        self.touch(range(B))

    def _bind(self, table: np.ndarray) -> None:
        self.table = table
        self.item, self.pos, self.state, _, self.stop, self.replay, self.expect, self.seg_end, self.claim_q = (
            table[:, i] for i in range(len(COLUMNS))
        )

    def touch(self, rows: Iterable[int]) -> None:
        """Plan ``rows`` afresh in the next batch (their state was set from outside its events)."""
        self.due.setdefault(self.k, set()).update(rows)
        self._same = None

    def _set_row(self, b: int, cursor: list[int], q0: int) -> None:
        """Row ``b``'s state from its cursor at epoch step ``q0`` (an epoch's start, a resume, a row adopted)."""
        item, pos, state, flags = cursor
        segment = self.segment
        replay, expect = (flags & _cursor.REPLAYED) != 0, -(flags & _cursor.OPEN_ENDED != 0)
        self.table[b] = (item, pos, IDLE, 0, 0, replay, expect, 0, q0)
        if state == DRY:
            self.state[b] = DRY
        elif state == FOLLOW:  # the item's next segment starts at ``pos`` (``_walk``)
            self.state[b], self.stop[b], self.seg_end[b] = FOLLOW, pos + OPEN, pos
        elif state in (LIVE, SHORT):
            length = self.claim_order.item_length(item)
            end = stream_end(pos, length, segment) if length >= 0 else pos + OPEN  # (unknown: open)
            self.stop[b], self.expect[b] = end, length
            self.seg_end[b] = ((pos - 1) // segment + 1) * segment if segment else -1
            self.claim_q[b] = next_claim_step(q0, end - pos, self.T, self.pack)
            self.state[b] = state
        self.table[b, 3] = self._flags(int(self.replay[b]), int(self.expect[b]))

    def _start(self, b: int) -> Walk:
        """Row ``b``'s walk at its batch's start, from the table."""
        return [0, 0, [], [], *self.table[b, [0, 1, 2, 4, 5, 6, 7, 8]].tolist(), False, False]

    def _flags(self, replay: int, expect: int) -> int:
        """A row's cursor flags."""
        return _cursor.REPLAYED * (replay != 0) + _cursor.OPEN_ENDED * (self.segment != 0 and expect < 0)

    def next_plan(self, probe: Probe | None = None) -> BatchRuns:
        """The plan of the next batch; the rows' state moves past it. ``probe`` reads streams of unknown length."""
        opening = self.open_batch(probe)
        self.make_claims(opening)
        return self.close_batch(opening)

    def open_batch(self, probe: Probe | None = None) -> Opening:
        """Begin the next batch's plan: the open rows are read to their end or the batch's (``_walk``)."""
        self._probe, self._walks, self._got, self._claims, self._seen = probe, {}, {}, [], 0
        opened: list[int] = []
        lo, q0 = self.lo, self.k * self.T
        if probe is None:
            return Opening(self._claims, opened, None, (self.k + 1) * self.T * self.B_all)
        rows = np.flatnonzero(((self.state == LIVE) & (self.stop >= OPEN)) | (self.state == FOLLOW))
        for b in rows.tolist():
            s0, w = self.state[b], self._walk(b, None, (), [], [])
            t, state, claim_q = w[0], w[6], w[11]
            if state in (IDLE, SHORT):  # its stream ended: its next claim is known
                self.claim_order.close(b + lo, claim_q)
            else:
                self.claim_order.read_through(b + lo, q0)
                if s0 == state == LIVE and len(w[2]) == 1 and w[2][0][2] == t:  # read on through it: a whole row
                    continue
            self._walks[b] = w
            opened.append(b)
        return Opening(self._claims, opened, self.open_ticket, (self.k + 1) * self.T * self.B_all)

    def open_ticket(self, b: int, ticket: int, step: int) -> int:
        """The claims' opener: row ``b`` (of every row) takes the open stream of ``ticket`` at epoch step ``step`` and
        reads it: ``EMPTY``, its next claim step, or ``OPEN``."""
        b -= self.lo
        self._walks[b], answer = self._open(b, self._walks.get(b), self.claims_of(b), ticket, step, self.k)
        return answer

    def _open(self, b: int, w: Walk | None, got: list[Any], ticket: int, step: int, k: int) -> tuple[Walk, int]:
        """Row ``b``'s walk ``w`` through batch ``k`` (with its claims ``got``) goes on with the open stream of
        ``ticket`` claimed at epoch step ``step``: the walk, and the opener's answer."""
        used, runs, pads = (0, [], []) if w is None else (w[1], w[2], w[3])
        n_runs = len(runs)
        w = self._walk(b, w, [*got[used:], (step, ticket, 1, 0, -1)], runs, pads, k)
        if w[6] == IDLE and len(runs) == n_runs and w[0] == step - k * self.T:
            w[1] = len(got)  # (the claim goes on: its next ticket is taken at the same key)
            return w, EMPTY
        w[1] = len(got) + 1
        return w, int(w[11]) if w[6] in (IDLE, SHORT) else OPEN

    def make_claims(self, opening: Opening, wait: bool = True) -> bool:
        """Make the batch's claims; without ``wait``, stop before one whose turn has not come (False)."""
        rows = (self.lo, self.lo + self.B)
        return self.claim_order.claim_until(opening.limit, opening.got, opening.opener, wait, rows)

    def claims_of(self, b: int) -> list[tuple[int, ...]]:
        """Row ``b``'s claims in the batch so far: (step, first ticket, count, dry, steps)."""
        got, by_row = self._claims, self._got
        for g in got[self._seen :]:
            by_row.setdefault(g[0], []).append(g[1:])
        self._seen = len(got)
        return by_row.get(b, [])

    def close_batch(self, opening: Opening) -> BatchRuns:
        """The batch's plan once its claims are made; the rows' state moves past it."""
        k, T, B = self.k, self.T, self.B
        due = self.due.pop(k, None)
        got, opened = opening.got, opening.opened
        if self.EVENTS and due is None and not got and not opened:
            return self._steady()
        self._same = None
        q0, q1 = k * T, (k + 1) * T
        crossing = {g[0] for g in got}.union(opened)  # (an opened row is planned from what was read, ``_cross``)
        changed = sorted(crossing.union(due or ()) if self.EVENTS else range(B))
        state, pos = self.state, self.pos
        # The rows that change nothing read on, pad on (their position counts on) or stay dry: ``kind`` says which.
        kind = self._kinds[state + 1]
        kind[changed] = 0
        # (row, its stream's steps left after the batch, its next claim): the rows planned here
        ends: list[tuple[int, int, int]] = []
        rest = [b for b in changed if b not in crossing]
        if len(rest) >= self.MANY:  # (the same as the loop below, as arrays: most of these rows cross)
            ends, rest = read_on(self.table, rest, kind, crossing, q1, T), []
        for b, (_, p, s, _, stop, _, _, _, claim) in zip(rest, self.table[rest].tolist(), strict=True):
            if s == LIVE and stop - p >= T:
                kind[b] = (1, 0, T)
                ends.append((b, stop - p - T if stop < OPEN else OPEN, claim))
            elif s == SHORT and claim >= q1:
                kind[b] = (0, 1, T if claim > q1 else 0)
                ends.append((b, -1, claim))
            elif s == DRY:
                kind[b] = (0, 1, 0)
            elif s != FOREIGN:
                crossing.add(b)
        out = self._plan(k, np.flatnonzero(kind[:, 0]), np.flatnonzero(kind[:, 1]))
        pos += kind[:, 2]
        for b, left, claim in ends:
            if left == 0 or (left < 0 and claim == q1):  # the stream ends with the batch, or the padding does
                state[b] = IDLE if claim == q1 else SHORT
            self._file(b, LIVE if left > 0 else int(state[b]), left, claim, q1)
        n_pads = len(out.pads)
        walks = self._walks
        many = self._cross_many(crossing.difference(walks), got, q0, out) if len(crossing) >= self.MANY else None
        one_by_one = sorted(crossing.difference(many) if many else crossing)
        by_row = self._got
        if one_by_one:
            self.claims_of(-1)
        for b in one_by_one:
            w, claims = walks.get(b), by_row.get(b, [])
            if w is not None:  # (read before the batch's claims: its runs so far, then the rest from where it stopped)
                out.runs += w[2]
                out.pads += w[3]
                claims = claims[w[1] :]
            self._finish(b, self._walk(b, w, claims, out.runs, out.pads))
        if len(got) < 16:
            for b, _, _, count, dry, _ in got:
                out.claims[b] += count
                out.dry[b] += dry
        else:
            claimed = np.array(got, np.int64)
            out.claims += np.bincount(claimed[:, 0], claimed[:, 3], self.B).astype(np.int64)
            out.dry += np.bincount(claimed[:, 0], claimed[:, 4], self.B).astype(np.int64)
        self._walks, self._got, self._claims, self._seen = {}, {}, [], 0
        if many and one_by_one:  # each row's runs and padding in step order, the rows in order, as one by one
            out.runs.sort()
            out.pads[n_pads:] = sorted(out.pads[n_pads:])
        out.cursors = out.cursors.copy()
        self.k = k + 1
        return out

    def _cross_many(self, rows: set[int], got: list[tuple[int, ...]], q0: int, out: BatchRuns) -> set[int]:
        """Plan the crossing ``rows`` of the usual shapes as arrays (``crossings``); returns those planned."""
        at, claims, order = np.array(sorted(rows), np.int64), np.array(got, np.int64).reshape(-1, 6), self.order
        crossed = cross_many(self.table, at, claims, order[: self.claim_order.n], q0, self.T, self.pack, self.segment)
        out.runs += crossed.runs
        out.pads += crossed.pads
        if self.EVENTS and len(crossed.rows):  # (the rows filed by batch: a few batches hold them all)
            ranked = np.argsort(crossed.due, kind="stable")
            batches, first = np.unique(crossed.due[ranked], return_index=True)
            for at, rows_at in zip(batches.tolist(), np.split(crossed.rows[ranked], first[1:]), strict=True):
                self.due.setdefault(at, set()).update(rows_at.tolist())
        return set(crossed.rows.tolist())

    def _file(self, b: int, state: int, left: int, claim: int, q: int) -> None:
        """File row ``b``, in ``state`` at epoch step ``q`` (``left``: its stream's steps left), under the batch of
        its next event."""
        if not self.EVENTS:
            return
        if state == LIVE and left < OPEN:  # its stream ends
            at = (q + left - 1) // self.T
        elif state == SHORT:  # its padding ends
            at = (claim - 1) // self.T
        elif state == IDLE:  # it claims
            at = claim // self.T
        else:  # dry, planned elsewhere, or open (its reads find its end)
            return
        self.due.setdefault(max(at, q // self.T), set()).add(b)

    def _plan(self, k: int, whole: np.ndarray, pads: np.ndarray) -> BatchRuns:
        """Batch ``k``'s plan of the ``whole`` rows and the ``pads`` rows."""
        rows, z, cursors = self.table[whole], np.zeros(self.B, np.int64), self.table[:, :4]
        item, pos, replay, stop, expect, seg_end = (rows[:, c] for c in (0, 1, 5, 4, 6, 7))
        pads_at = [(b, 0, self.T) for b in pads.tolist()]
        return BatchRuns(k, whole, item, pos, replay != 0, stop, expect, seg_end, [], pads_at, cursors, z, z.copy())

    def _steady(self) -> BatchRuns:
        """A batch in which no row changes: the batch before's parts."""
        if self._same is None:
            state = self.state
            same = self._plan(-1, np.flatnonzero(state == LIVE), np.flatnonzero((state == SHORT) | (state == DRY)))
            self._same = same, np.where((state == LIVE) | (state == SHORT), self.T, 0)  # (the steps counted on)
        same, counts = self._same
        at = self.pos[same.whole]
        self.pos += counts
        self.k += 1
        item, replay, stop, expect, seg_end = same.item, same.replay, same.stop, same.expect, same.seg_end
        cursors = self.table[:, :4].copy()
        pads, claims, dry = list(same.pads), same.claims, same.dry
        return BatchRuns(
            self.k - 1, same.whole, item, at, replay, stop, expect, seg_end, [], pads, cursors, claims, dry
        )

    def _walk(self, b: int, w: Walk | None, claims: Any, runs: list[Run], pads: list[Any], k: int = -1) -> Walk:
        """Row ``b``'s runs and padding into ``runs`` and ``pads``, from where its walk ``w`` stopped (None: the
        batch's start) with its ``claims``, to the batch's end or a claim not made yet; an open stream is read (the
        probe). A row's state changes here and nowhere else."""
        T, segment, pack, q0 = self.T, self.segment, self.pack, (self.k if k < 0 else k) * self.T
        if w is None:
            item, pos, state, _, stop, replay, expect, seg_end, claim_q = self.table[b].tolist()
            t, used, fresh, opens = 0, 0, False, False
        else:
            t, used, _, _, item, pos, state, stop, replay, expect, seg_end, claim_q, fresh, opens = w
        c, n_claims = 0, len(claims)
        while t < T:
            if state == LIVE and stop >= OPEN:  # an open bound: read the stream to its end or the batch's
                assert self._probe is not None
                n_max = min(T - t, seg_end - pos) if segment else T - t
                got = self._probe(b, item, pos, t, n_max, opens)
                n, opens = n_max if got >= OPEN else got, False
                if n:
                    runs.append((b, t, n, item, pos, replay != 0, fresh, stop, expect, seg_end))
                fresh, pos, t = False, pos + n, t + n
                if got < OPEN:  # it ended: the row claims there ("pack") or at the next batch ("pad")
                    claim_q = q0 + t if pack or not t else q0 + T
                    state, stop = (IDLE if claim_q == q0 + t else SHORT), pos
                elif segment and pos == seg_end:
                    state = FOLLOW
            elif state == LIVE:
                n = min(stop - pos, T - t)
                runs.append((b, t, n, item, pos, replay != 0, fresh, stop, expect, seg_end))
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
            elif state == IDLE:  # its claim: tickets first .. first + count - 1
                if c == n_claims:
                    break  # not made yet
                step, first, count, is_dry, steps = claims[c]
                c += 1
                assert step == q0 + t, (b, step, q0, t)
                taken = first + count - 1 - is_dry  # the stream it takes (dry: the last empty one it passed)
                if taken >= first:
                    item, start, _, expect = self.order[taken % self.claim_order.n].tolist()
                    pos, replay = start, int(taken >= self.claim_order.n)
                if is_dry:
                    state = DRY
                    continue
                stop = start + (steps if steps >= 0 else OPEN)  # (not known: an open bound, read from its claim)
                seg_end = (start // segment + 1) * segment if segment else -1  # (mid-segment: replan)
                claim_q = next_claim_step(step, steps, T, pack)
                fresh, opens, state = True, steps < 0, LIVE
            elif state == FOLLOW:  # the item's next segment, of an item of unknown length, goes on the same row
                if t and not pack:  # "pad": it starts at the next batch
                    pads.append((b, t, T))
                    t = T
                else:
                    seg_end, fresh, state = pos + segment, True, LIVE
            else:  # DRY
                pads.append((b, t, T))
                t = T
        return [t, c + used, runs, pads, item, pos, state, stop, replay, expect, seg_end, claim_q, fresh, opens]

    def _finish(self, b: int, w: Walk) -> None:
        """Row ``b``'s state after the batch, from its walk, filed under the batch of its next event."""
        _, pos, state, _, stop, _, _, _, claim_q = row = self._after(b, w, self.k)
        self.table[b] = row
        self._file(b, state, stop - pos if stop < OPEN else OPEN, claim_q, (self.k + 1) * self.T)

    def _after(self, b: int, w: Walk, k: int) -> tuple[int, ...]:
        """Row ``b``'s table row after batch ``k``, from its walk through it."""
        t, _, _, _, item, pos, state, stop, replay, expect, seg_end, claim_q, _, _ = w
        assert t == self.T, f"row {b}'s claim was not made"
        if state == SHORT and claim_q == (k + 1) * self.T:  # its claim is at the next batch's first step: free now
            state = IDLE
        return item, pos, state, self._flags(replay, expect), stop, replay, expect, seg_end, claim_q
