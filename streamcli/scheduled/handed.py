"""A producer's own rows in groups at different batches (``fills.balanced.Handover``, lengths not all known): rows
whose claim waits for its turn split off (``split``) while the rest go on, groups at one batch merge (``merge``), a
row taken over starts at its boundary (``alone``, ``adopt``) and one given away leaves (``drop``). Which group plans
a row never changes its plan: its key in the control block stays a valid lower bound while it waits or moves.
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.plans import BatchRuns, Opening
from streamcli.scheduled.schedule import FOREIGN, IDLE, LIVE, SHORT, Probe, Schedule


class HandedSchedule(Schedule):
    """A ``Schedule`` over every row of the batch, of which it plans those it owns (the rows not ``FOREIGN``)."""

    opening: Opening | None = None  # the batch whose plan waits for a claim's turn
    stalled = False  # every row waits for its claim's turn (the producer looks again once the earliest may go)

    @property
    def owned(self) -> np.ndarray:
        owned: np.ndarray = self.state != FOREIGN
        return owned

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

    def split(self, rows: list[int]) -> HandedSchedule:
        """Rows ``rows`` leave, where the plan stands, for a new schedule (with what was read and claimed of them)."""
        other = self.fork()
        assert isinstance(other, HandedSchedule)
        mine = np.zeros(self.B, bool)
        mine[rows] = True
        other.state[~mine & other.owned] = FOREIGN
        self.state[mine] = FOREIGN
        self.touch(())
        other.touch(())
        other.claim_order = self.claim_order.split(mine)
        if self.opening is not None:
            op = self.opening
            self.claims_of(-1)
            walks, got = self._walks, self._got  # (what was read and claimed of each row in this batch)
            other._walks, other._got = (
                {b: w for b, w in walks.items() if mine[b]},
                {b: g for b, g in got.items() if mine[b]},
            )
            self._walks, self._got = (
                {b: w for b, w in walks.items() if not mine[b]},
                {b: g for b, g in got.items() if not mine[b]},
            )
            opener = None if op.opener is None else other.open_ticket
            other.opening = Opening(
                [g for g in op.got if mine[g[0]]], [b for b in op.opened if mine[b]], opener, op.limit
            )
            other.stalled = True  # (its rows wait for their turn: looked at again once the earliest may go)
            op.got[:] = [g for g in op.got if not mine[g[0]]]
            other._claims, other._seen, self._seen = other.opening.got, len(other.opening.got), len(op.got)
            op.opened[:] = [b for b in op.opened if not mine[b]]
        return other

    def merge(self, other: HandedSchedule) -> None:
        """Take over the rows of ``other``, which stands at the same batch boundary."""
        assert self.k == other.k and self.opening is None and other.opening is None
        rows = np.flatnonzero(other.owned)
        self.table[rows] = other.table[rows]
        self.touch(rows.tolist())
        self.claim_order.merge(other.claim_order)

    def alone(self, k: int) -> HandedSchedule:
        """A new schedule that owns no row yet, at batch ``k`` (a row handed over there is ``adopt``-ed into it)."""
        other = self.fork()
        assert isinstance(other, HandedSchedule)
        other.state[:] = FOREIGN
        other.k, other.opening, other.stalled, other.due = k, None, False, {}
        other.touch(())
        other.claim_order = self.claim_order.split(np.zeros(self.B, bool))
        return other

    def adopt(self, b: int, cursor: list[int]) -> None:
        """Row ``b`` is this schedule's from its batch on, at ``cursor`` (an open row's bound stays as published)."""
        assert self.state[b] == FOREIGN and self.opening is None, f"row {b} is planned here already"
        self._set_row(b, cursor, self.k * self.T)
        self.touch([b])
        state = self.state[b]
        if state == IDLE or (state in (LIVE, SHORT) and self.stop[b] < OPEN):
            self.claim_order.close(b, int(self.claim_q[b]))

    def drop(self, b: int) -> None:
        """Row ``b`` goes to another producer from this schedule's batch on."""
        assert self.opening is None
        self.claim_order.drop(b)
        self.state[b] = FOREIGN
        self.touch([b])
