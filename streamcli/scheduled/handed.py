"""The one schedule of a producer that plans only the rows it owns (``fills.balanced``, lengths not all known), each
row at its own batch: a claim waits for its turn (``claims.Turns``), and turns follow the key, so once one waits every
later claim waits too, and only rows reading on may go on. Rows whose claims wait are left behind at their batch
(``leave``) while the others go on; a row taken over starts at the boundary it was handed over at (``take``). A row
behind is planned alone (``plan_alone``), a batch at a time, until it reaches the others' batch (``rejoin``). Where a
row is planned never changes its plan: its key in the control block stays a valid lower bound while it waits or moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.scheduled.claims import OPEN, ClaimOrder
from streamcli.scheduled.plans import BatchRuns
from streamcli.scheduled.schedule import FOLLOW, FOREIGN, IDLE, LIVE, SHORT, Probe, Schedule, Walk


@dataclass
class Alone:
    """A row planned alone at batch ``k``: its walk through it, its claims, and those made in the batch."""

    k: int
    walk: Walk
    claims: ClaimOrder
    got: list[tuple[int, ...]] = field(default_factory=list)
    started: bool = False  # its batch's open stream is read and its bound published (``Schedule.open_batch``)


class HandedSchedule(Schedule):
    """A ``Schedule`` of the rows it owns (the rows not ``FOREIGN`` at its batch ``k``, and those ``alone``)."""

    opening: Any = None  # the batch whose plan waits for a claim's turn (``plans.Opening``)

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.alone: dict[int, Alone] = {}

    def try_plan(self, probe: Probe) -> BatchRuns | None:
        """The next batch's plan, or None while a claim of it waits for its turn (call again to go on)."""
        if self.opening is None:
            self.opening = self.open_batch(probe)
        else:
            self._probe = probe
        if not self.make_claims(self.opening, wait=False):
            return None
        opening, self.opening = self.opening, None
        return self.close_batch(opening)

    def waiting(self) -> list[int]:
        """The rows whose claims in the batch being planned have not been made (their turn has not come)."""
        assert self.opening is not None
        return self.claim_order.rows_before(self.opening.limit)

    def leave(self, rows: list[int]) -> None:
        """Rows ``rows`` stay behind at the batch being planned, with what was read and claimed of them."""
        op, mine = self.opening, np.zeros(self.B, bool)
        mine[rows] = True
        self.claims_of(-1)
        for b in rows:
            w = self._walks.pop(b, None) or self._start(b)
            one = np.zeros(self.B, bool)
            one[b] = True
            got = [(b, *g) for g in self._got.pop(b, [])]
            self.alone[b] = Alone(self.k, w, self.claim_order.split(one), got, started=True)
        self.state[mine] = FOREIGN
        op.got[:] = [g for g in op.got if not mine[g[0]]]
        op.opened[:] = [b for b in op.opened if not mine[b]]
        self._seen = len(op.got)
        self.touch(())

    def take(self, b: int, k: int, cursor: list[int]) -> None:
        """Row ``b`` is this schedule's from batch ``k`` on, at ``cursor`` (an open row's bound stays as published)."""
        assert self.state[b] == FOREIGN and b not in self.alone, f"row {b} is planned here already"
        self._set_row(b, cursor, k * self.T)
        state, claims = self.state[b], self.claim_order.split(np.zeros(self.B, bool))
        if state == IDLE or (state in (LIVE, SHORT) and self.stop[b] < OPEN):
            claims.close(b, int(self.claim_q[b]))
        self.alone[b] = Alone(k, self._start(b), claims)
        self.state[b] = FOREIGN
        self.rejoin()

    def drop(self, b: int) -> None:
        """Row ``b`` goes to another producer from its next batch on."""
        if self.alone.pop(b, None) is None:
            assert self.opening is None
            self.claim_order.drop(b)
            self.state[b] = FOREIGN
            self.touch([b])

    def rejoin(self) -> None:
        """Rows planned alone that stand at the start of this schedule's next batch are planned with the others."""
        if self.opening is not None or not self.alone:
            return
        if not (self.state != FOREIGN).any():  # (no row left here: the schedule goes on where the rows behind stand)
            self.k = min(r.k for r in self.alone.values())
        for b, r in list(self.alone.items()):
            if r.k == self.k and not r.started:
                w = r.walk
                self.table[b] = (w[4], w[5], w[6], self._flags(w[8], w[9]), *w[7:12])
                self.claim_order.merge(r.claims)
                del self.alone[b]
                self.touch([b])

    def plan_alone(self, b: int, probe: Probe) -> BatchRuns | None:
        """Row ``b``'s plan of its batch, planned alone, or None while a claim of it waits for its turn."""
        r, T, self._probe = self.alone[b], self.T, probe
        if not r.started:  # (as ``open_batch``: an open stream is read first, and its bound or next claim published)
            opens = r.walk[6] == FOLLOW or (r.walk[6] == LIVE and r.walk[7] >= OPEN)
            r.walk = self._walk(b, r.walk, (), r.walk[2], r.walk[3], r.k)
            if opens and r.walk[6] in (IDLE, SHORT):
                r.claims.close(b, r.walk[11])
            elif opens:
                r.claims.read_through(b, r.k * T)
            r.started = True

        def opener(row: int, ticket: int, step: int) -> int:
            r.walk, answer = self._open(b, r.walk, [g[1:] for g in r.got], ticket, step, r.k)
            return answer

        if not r.claims.claim_until((r.k + 1) * T * self.B_all, r.got, opener, wait=False):
            return None
        w = self._walk(b, r.walk, [g[1:] for g in r.got][r.walk[1] :], r.walk[2], r.walk[3], r.k)
        row = self._after(b, w, r.k)
        cursors, claims, dry = np.zeros((self.B, 4), np.int64), np.zeros(self.B, np.int64), np.zeros(self.B, np.int64)
        cursors[b], claims[b], dry[b] = row[:4], sum(g[3] for g in r.got), sum(g[4] for g in r.got)
        none = np.zeros(0, np.int64)
        plan = BatchRuns(r.k, none, none, none, none != 0, none, none, none, w[2], w[3], cursors, claims, dry)
        r.k, r.got, r.started = r.k + 1, [], False
        r.walk = [0, 0, [], [], *row[:3], *row[4:], False, False]
        return plan
