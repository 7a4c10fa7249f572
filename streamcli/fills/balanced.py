"""The balanced policy's producer (``fills.writers.Balanced``): each producer writes the rows it owns, and one
protocol moves a row to an idle producer at a batch boundary, every length known (``Balancer``: every producer
plans every row) or not (``Handover``: each plans its own rows, a row whose claim waits left behind).

The producer that has just written the batch ``k`` everything waits for gives its cheapest row (the seconds its last
batch took, timed row by row while another producer is idle) to an idle producer if that lowers the busier load,
never its last row nor one whose stream broke its promise (the taker would reopen it past where it broke). It marks
its rows of ``k`` written, then hands the row over with its cursor (``Control.hand_over``); the taker writes it from
``k + 1`` as a resumed row (``open(item, start=pos)``), so who writes a row changes no byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import numpy as np

from streamcli.fills.flags import Views, write_cursors, write_flags
from streamcli.fills.iterators import Rows
from streamcli.fills.spec import Faults
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.schedule import FOREIGN, BatchRuns, Probe, Schedule
from streamcli.shared.control import NEVER, Control


class OwnedRows:
    """Producer ``w``'s rows under the balanced policy (at first its block of them), planned by ``sched``."""

    def __init__(
        self,
        control: Control,
        sched: Schedule,
        rows: Rows,
        faults: Faults,
        slot: Callable[[int], Views],
        *,
        w: int,
        lock: AbstractContextManager[Any],
        busy: Callable[[], None],
    ) -> None:
        self.control, self.sched, self.rows, self.faults, self.slot = control, sched, rows, faults, slot
        self.w, self.lock, self.busy = w, lock, busy
        self.steps_t = np.arange(sched.T, dtype=np.int64)
        self.cost: dict[int, float] = {}  # per row owned: the seconds its last timed batch took here
        self.probed: dict[int, float] = {}  # per row: the seconds the plan of the batch being written read it
        self.steps = 0  # valid steps written, for the busy statistics

    def arrived(self) -> tuple[int, int, np.ndarray] | None:
        """The row handed over to this producer, once its giver has let it go: (row, first batch, cursor there)."""
        b, to, _ = self.control.moving
        if b < 0 or to != self.w:
            return None
        with self.lock:
            return self.control.arrived(self.w)

    def write(self, part: BatchRuns, cols: list[int], read: set[tuple[int, int]] | None = None) -> int:
        """Write rows ``cols`` of batch ``part.k`` (``read``: the runs planning wrote already), mark them written, and
        hand a row over if one goes (returned; -1 if none). While another producer is idle each row is timed."""
        v, rows, cost, probed, control = self.slot(part.k), self.rows, self.cost, self.probed, self.control
        self.faults.k = part.k
        write_flags(v, part, self.steps_t, cols)
        steps, t0 = rows.steps, time.perf_counter()
        if control.idle_elsewhere(self.w):
            one = np.zeros(len(part.cursors), bool)
            short: set[int] = set()
            for b in cols:
                one[b] = True
                t = time.perf_counter()
                short |= rows.fill(v, part if len(cols) == 1 else part.only(one), read)
                cost[b] = probed.get(b, 0.0) + time.perf_counter() - t
                one[b] = False
        else:  # (one call: a row's own fill costs a pass over the plan)
            short = rows.fill(v, part, read)
        control.set_load(self.w, sum(probed.values()) + time.perf_counter() - t0)
        probed.clear()
        write_cursors(v, part, short, cols)
        if v.writer is not None:
            v.writer[cols] = self.w + 1  # (0: none; who wrote a row is timing's choice, ``inspect`` shows it)
        self.steps += rows.steps - steps
        b, taker = self._choose(cols, part.k)
        control.set_written(cols, part.k + 1)  # (before the owner changes: the taker goes on from the next batch)
        if b < 0:
            return -1
        with self.lock:
            if not control.hand_over(b, taker, part.k + 1, part.cursors[b].tolist()):
                return -1
        rows.drop(b)
        cost.pop(b, None)
        if rows.tracer is not None:
            t = time.perf_counter()
            rows.tracer.complete("row move", t, t, {"row": b, "after_batch": part.k})
        return b

    def _choose(self, cols: list[int], k: int) -> tuple[int, int]:
        """(row, taker) if the cheapest of rows ``cols`` goes to an idle producer after batch ``k``, which every batch
        waits for, and the move lowers the busier load; else (-1, -1)."""
        control, cost, readers = self.control, self.cost, self.rows.readers
        if len(cols) < 2 or control.written_min() != k or (taker := control.taker(self.w)) is None:
            return -1, -1
        # (a row whose stream broke its promise stays: its taker would reopen the stream past where it broke)
        movable = [b for b in cols if cost.get(b, 0.0) > 0 and not (b in readers and readers[b].dead)]
        if len(movable) < 2:
            return -1, -1
        b = min(movable, key=lambda r: (cost[r], r))
        if cost[b] >= sum(cost.values()) - control.load_of(taker):
            return -1, -1  # (the busier of the two would be no less busy)
        return b, taker


class Balancer(OwnedRows):
    """Every length known: this producer plans every row and writes its own, each at the earliest batch it has not
    completed (a row handed over goes on where the plan says, which is where its cursor says)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.plans: dict[int, BatchRuns] = {}  # batches not yet whole: a row taken over is written from them

    def step(self) -> bool:
        """Write this producer's rows of its earliest batch that is handed out; False when there is none."""
        control = self.control
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


class Handover(OwnedRows):
    """Lengths not all known: an open stream is read as its batch is planned, by the producer that owns its row, so
    this producer plans its own rows (``scheduled.handed``), claiming by turns (``fills.iterators``). A claim whose turn
    has not come does not hold the others: its rows stay behind, each planned alone until it catches up. No producer
    waits for another: no deadlock."""

    def step(self) -> bool:
        """Write the rows of one batch of a row behind, or of the others' next batch; False when nothing can go on."""
        sched = self.sched
        assert isinstance(sched, HandedSchedule)
        got = self.arrived()
        if got is not None:
            sched.take(got[0], got[1], got[2].tolist())
        sched.rejoin()
        handed, own = self.control.handed, int((sched.state != FOREIGN).sum())
        front = sched.k if own and sched.k < handed else handed  # (the others' batch, if they may go on)
        behind = sorted(sched.alone.items(), key=lambda e: (e[1].k, e[0]))
        for b, alone in behind:  # rows behind the others' batch first: batches are written in order
            if alone.k >= front:
                break
            part = self._plan(alone.k, partial(sched.plan_alone, b))
            if part is not None:
                return self._wrote(part, [b])
        plan = self._plan(sched.k, sched.try_plan) if front < handed else None
        if plan is None and front < handed:
            waiting = sched.waiting()
            if len(waiting) < own:
                sched.leave(waiting)  # the others go on without them
                plan = self._plan(sched.k, sched.try_plan)
                assert plan is not None, "rows planned on with a claim still waiting"
        if plan is None:  # the others wait for their turn (or have nothing handed out): rows at or past their batch
            for b, alone in behind:
                if front <= alone.k < handed and (part := self._plan(alone.k, partial(sched.plan_alone, b))):
                    return self._wrote(part, [b])
            return False  # (the worker loop says so: ``Control.set_idle``, read by ``Control.taker``)
        return self._wrote(plan, np.flatnonzero(sched.state != FOREIGN).tolist())

    def _wrote(self, plan: BatchRuns, cols: list[int]) -> bool:
        """Write rows ``cols`` of ``plan``: a row of them handed over leaves the schedule."""
        self.busy()
        read = self.rows.read
        gone = self.write(plan, cols, read)
        self.rows.read = {r for r in read if r[0] not in cols}  # (a row behind's reads wait for its plan)
        if gone >= 0:
            assert isinstance(self.sched, HandedSchedule)
            self.sched.drop(gone)
        return True

    def _plan(self, k: int, plan: Callable[[Probe], BatchRuns | None]) -> BatchRuns | None:
        """A plan of batch ``k`` (None while a claim waits for its turn); its reads are timed as the rows'."""
        rows, probed = self.rows, self.probed
        rows.v, self.faults.k = self.slot(k), k

        def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
            t = time.perf_counter()
            got = rows.probe(b, item, pos, t0, n, fresh)
            probed[b] = probed.get(b, 0.0) + time.perf_counter() - t
            return got

        return plan(probe)
