"""The balanced policy on the one schedule, every length known (``fills.writers.Balanced``): rows move to an idle
producer by the protocol of ``fills.owned``.

Every producer plans every row of every batch (the plan follows from the lengths, and each producer makes every
claim anyway) and writes, from that plan, the rows it owns (``Control.owned_by``): their data, flags and summary,
then it counts them done (``set_written``). A row handed over to it goes on from the boundary it was handed over
at, from the plan (its stream reopened where the plan says, in ``iterators.Rows``).
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
        self.sched, self.B = sched, sched.B
        self.plans: dict[int, BatchRuns] = {}  # batches not yet whole: a row taken over is written from them

    def step(self) -> bool:
        """Write this producer's rows of its earliest batch that is handed out; False when there is none."""
        control = self.control
        self.take_block()
        self.arrived()  # (a row handed over is this producer's in the rows table, from its boundary on)
        k, mine = self._earliest()
        if k >= control.handed:
            return False
        self.busy()
        done = control.written_min()
        for j in [j for j in self.plans if j < done]:
            del self.plans[j]
        plan = self._plan(k)
        giving = self.offer(mine, k)
        self.write(plan.only(mine), np.flatnonzero(mine).tolist())
        if giving >= 0:
            self.release(giving, k)
        return True

    def _earliest(self) -> tuple[int, np.ndarray]:
        """The earliest batch some row of this producer still has to write, and those rows (a mask)."""
        owned, written = self.control.owned_by(self.w)
        at = np.where(owned, written, NEVER)
        k = int(at.min()) if len(at) else NEVER
        return k, at == k

    def _plan(self, k: int) -> BatchRuns:
        sched = self.sched
        while sched.k <= k:
            plan = sched.next_plan()
            self.plans[plan.k] = plan
        return self.plans[k]
