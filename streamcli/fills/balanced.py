"""The balanced policy where every length is known (``fills.writers.Balanced``): every producer plans every row of
every batch (the plan follows from the lengths) and writes, from that plan, the rows it owns (``Control.owned_by``),
each at the earliest batch it has not completed. Rows move by the protocol of ``fills.owned``; a row handed over
goes on where the plan says, which is where its cursor says.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views
from streamcli.fills.iterators import Rows
from streamcli.fills.owned import OwnedRows
from streamcli.scheduled.schedule import BatchRuns, Schedule
from streamcli.shared.control import NEVER, Control


class Balancer(OwnedRows):
    """Producer ``w``'s side of a balanced epoch planned by ``sched``; ``block``: the rows it owns at the start."""

    def __init__(
        self,
        control: Control,
        sched: Schedule,
        rows: Rows,
        faults: Faults,
        slot: Callable[[int], Views],
        *,
        w: int,
        block: tuple[int, int],
        lock: AbstractContextManager[Any],
        busy: Callable[[], None],
    ) -> None:
        super().__init__(control, rows, faults, slot, T=sched.T, w=w, block=block, lock=lock, busy=busy)
        self.sched = sched
        self.plans: dict[int, BatchRuns] = {}  # batches not yet whole: a row taken over is written from them

    def step(self) -> bool:
        """Write this producer's rows of its earliest batch that is handed out; False when there is none."""
        control = self.control
        self.take_block()
        self.arrived()  # (the owner column makes the row this producer's; this ends the hand-over)
        owned, written = control.owned_by(self.w)
        at = np.where(owned, written, NEVER)
        k = int(at.min()) if len(at) else NEVER
        if k >= control.handed:
            return False
        self.busy()
        done = control.written_min()
        for j in [j for j in self.plans if j < done]:
            del self.plans[j]
        while self.sched.k <= k:
            plan = self.sched.next_plan()
            self.plans[plan.k] = plan
        mine = at == k
        self.write(self.plans[k].only(mine), np.flatnonzero(mine).tolist())
        return True
