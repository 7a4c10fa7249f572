"""The balanced policy on the one schedule (``fills.writers.Balanced``): rows move to an idle producer.

Every producer plans every row of every batch (the plan follows from the lengths, and each producer makes every
claim anyway) and writes, from that plan, the rows it owns (``Control.owned_by``): their data, flags and cursors,
then it counts them done (``set_written``). A row changes hands only at a batch boundary, and its new owner reopens
its stream where the plan says (``open(item, start=pos)``, as a resumed row does, in ``iterators.Rows``), so who
writes a row never changes a byte.

A producer that holds the batch everything waits for while another is idle gives up its cheapest row (measured:
the seconds its last batch took, timed while another producer was idle), never its last one nor one whose stream
broke its promise (its new owner would report it again); the idle producer takes it (``take_given``) and writes it
from the batch it is at. Costs differ by orders of magnitude between streams, so the row that moves is chosen by
time, not by count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views, write_cursors, write_flags
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
        control, lock, w = self.control, self.lock, self.w
        self.take_block()
        top = control.handed
        if control.given:
            with lock:
                control.take_given(w, top, own=False)
        k, mine = self._earliest()
        if k >= top and control.given:  # nothing else to do: take back a row given up here
            with lock:
                control.take_given(w, top, own=True)
            k, mine = self._earliest()
        if k >= top:
            return False
        self.busy()
        done = control.written_min()
        for j in [j for j in self.plans if j < done]:
            del self.plans[j]
        plan = self._plan(k)
        if done == k and mine.sum() > 1 and control.idle_elsewhere(w):
            mine = self._give_one(plan, mine)
        self._write(plan, mine)
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

    def _give_one(self, plan: BatchRuns, mine: np.ndarray) -> np.ndarray:
        """Give up the cheapest of this producer's rows of batch ``plan.k`` to an idle producer; returns the rows
        left to write."""
        b = self.cheapest(mine, least=2)  # (the costliest stays)
        if b < 0:
            return mine
        self.rows.drop(b)
        del self.cost[b]
        before = self.plans.get(plan.k - 1)  # (the cursor it is given up at: the taker follows the plan, not it)
        item, pos, state, flags = before.cursors[b].tolist() if before is not None else (-1, 0, 0, 0)
        with self.lock:
            self.control.give_row(b, self.w, (item, pos, state, flags))
        if self.rows.tracer is not None:
            t = time.perf_counter()
            self.rows.tracer.complete("row move", t, t, {"row": b, "batch": plan.k, "stream": item, "given": True})
        left = mine.copy()
        left[b] = False
        return left

    def _write(self, plan: BatchRuns, mine: np.ndarray) -> None:
        """This producer's rows ``mine`` of batch ``plan.k``, then their flags and cursors, then their completion.
        While another producer is idle (only then may a row move) the rows are filled one by one, each timed."""
        v = self.slot(plan.k)
        self.faults.k = plan.k
        cols = np.flatnonzero(mine).tolist()
        part = plan.only(mine)
        write_flags(v, part, self.steps_t, cols)
        steps = self.rows.steps
        if len(cols) > 1 and self.control.idle_elsewhere(self.w):
            one = np.zeros(self.B, bool)
            short: set[int] = set()
            for b in cols:
                one[b] = True
                t0 = time.perf_counter()
                short |= self.rows.fill(v, plan.only(one))
                self.cost[b] = time.perf_counter() - t0
                one[b] = False
        else:  # (one call: a row's own fill costs a pass over the plan)
            short = self.rows.fill(v, part)
        write_cursors(v, part, short, cols)
        self.steps += self.rows.steps - steps
        self.control.set_written(cols, plan.k + 1)
