"""A schedule of rows that change hands: a producer plans the rows it owns, and adopts or drops one at a batch
boundary (the balanced policy of lengths not all known, ``fills.handover``).

The claims stay in the one order every producer shares (its turns, ``scheduled.claims.Turns``): a row's key in the
control block is a valid lower bound while the row moves, because its giver has read it through the batch before
the boundary, and its taker publishes the exact key again as soon as it knows it. A row adopted at a boundary is
set from its cursor there, exactly as a resumed row is, so who plans a row never changes its plan.
"""

from __future__ import annotations

from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.schedule import FOREIGN, IDLE, LIVE, SHORT, Schedule


class HandedSchedule(Schedule):
    """A ``Schedule`` over every row of the batch, of which it plans those it owns (``owned``)."""

    def adopt(self, b: int, cursor: list[int]) -> None:
        """Row ``b`` is this producer's from the next batch on, at ``cursor``: its next claim enters the order where
        it is known (an open row's bound stays as its last owner published it)."""
        assert self.state[b] == FOREIGN, f"row {b} is planned here already"
        self._set_row(b, cursor, self.k * self.T)
        self.foreign -= 1
        state = self.state[b]
        if state == IDLE or (state in (LIVE, SHORT) and self.stop[b] < OPEN):
            self.claim_order.close(b, int(self.claim_q[b]))

    def drop(self, b: int) -> None:
        """Row ``b`` goes to another producer from the next batch on."""
        self.claim_order.drop(b)
        self.state[b] = FOREIGN
        self.foreign += 1
