"""The balanced policy when lengths are not all known (``fills.writers.Balanced``, ``known=False``): each producer
plans the rows it owns, in groups that stand at different batches, and rows move from the producer everything waits
for to an idle one.

A stream of unknown length is read as its batch is planned, by the one producer that owns its row, so a producer
plans only its own rows, its claims by turns with the others' (``fills.turns``). A claim whose turn has not come
does not hold the producer: the rows whose claims wait split off into a group of their own (``scheduled.handed``),
resumed once their turn comes, while the other rows go on to later batches; groups merge again where they meet. An
idle producer says so (``Control.set_idle``); the producer that holds the batch every row waits for commits its
cheapest row to it (measured: the seconds the row took in its last batch, reading included), writes it through the
batch it is planning, and hands it over with its cursor at that boundary; the idle producer adopts it there as a
resumed row (``open(item, start=pos)``), in a group of its own. No producer ever waits for another, so the turns
cannot deadlock, and who writes a row, in which group, never changes a byte.
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
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.plans import BatchRuns
from streamcli.shared.control import Control


class Handover(OwnedRows):
    """Producer ``w``'s side of such an epoch, planned from ``sched``; ``block``: the rows it owns at the start."""

    def __init__(
        self,
        control: Control,
        sched: HandedSchedule,
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
        self.template = sched
        self.groups = [sched]  # the schedules of this producer's rows, each at its own batch
        self.changed = False  # a group moved on, or a row came: groups may merge

    def step(self) -> bool:
        """Write the rows of one group's next batch, if one can go on; False when there is nothing to do."""
        control, w = self.control, self.w
        self.take_block()  # (the owner column says who holds a row, for a hand-over)
        b, to, _ = control.moving
        if b >= 0 and to == w:
            self._adopt()
        if self.changed and len(self.groups) > 1:
            self._merge()
        handed = control.handed
        for g in sorted(self.groups, key=lambda g: g.k):
            if g.k >= handed:
                break
            if g.stalled and not g.claim_order.next_ready():
                continue  # every row of it still waits for its turn
            plan = self._plan(g)
            if plan is None:
                waiting = g.waiting()
                if len(waiting) == int(g.owned.sum()):
                    g.stalled = True  # every row of it waits for its turn
                    continue
                self.groups.append(g.split(waiting))  # the others go on without them
                plan = self._plan(g)
                assert plan is not None, "a group planned on with a claim still waiting"
            self.busy()
            g.stalled, self.changed = False, True
            giving = self._offer(g, plan.k) if control.written_min() == plan.k else -1
            self._write(g, plan)
            if giving >= 0:
                self._release(g, giving, plan.k)
            return True
        return False  # (the worker loop says so: ``Reports.set_idle``, read by ``Control.taker``)

    def _merge(self) -> None:
        """Groups at the same batch boundary become one; groups left without rows go."""
        by_k: dict[int, HandedSchedule] = {}
        kept = []
        for g in self.groups:
            if g.opening is None and not g.owned.any():
                continue
            into = by_k.get(g.k) if g.opening is None else None
            if into is not None:
                into.merge(g)
                continue
            if g.opening is None:
                by_k[g.k] = g
            kept.append(g)
        self.groups = kept or [self.template.alone(self.template.k)]
        self.changed = False

    def _plan(self, g: HandedSchedule) -> BatchRuns | None:
        rows, cost = self.rows, self.cost
        rows.v, self.faults.k = self.slot(g.k), g.k
        if g.opening is None:
            for b in np.flatnonzero(g.owned).tolist():
                cost[b] = 0.0

        def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
            t = time.perf_counter()
            got = rows.probe(b, item, pos, t0, n, fresh)
            cost[b] = cost.get(b, 0.0) + time.perf_counter() - t
            return got

        return g.try_plan(probe)

    def _write(self, g: HandedSchedule, plan: BatchRuns) -> None:
        """The group's rows of batch ``plan.k``: data, flags and cursors, then their completion. A row's cost is what
        the plan's probe spent reading it and an equal share of the fill (rows of known length are read there)."""
        v, mine, read = self.slot(plan.k), g.owned, self.rows.read
        cols = np.flatnonzero(mine).tolist()
        part = plan  # (a group plans its own rows only: the others are FOREIGN to it)
        write_flags(v, part, self.steps_t, cols)
        steps, t0 = self.rows.steps, time.perf_counter()
        short = self.rows.fill(v, part, read)
        share = (time.perf_counter() - t0) / max(len(cols), 1)  # (the rows read here, not by the plan's probe)
        cost = self.cost
        for b in cols:
            cost[b] = cost.get(b, 0.0) + share
        self.control.set_load(self.w, sum(cost.values()))
        self.rows.read = {r for r in read if not mine[r[0]]}  # (another group's reads wait for its plan)
        write_cursors(v, part, short, cols)
        self.steps += self.rows.steps - steps
        self.control.set_written(cols, plan.k + 1)

    def _offer(self, g: HandedSchedule, k: int) -> int:
        """Commit the group's cheapest row (by its last batch) to an idle producer from batch ``k + 1`` on, if one
        is idle and the move evens the two producers' loads out: never this producer's last row, nor one whose
        stream broke its promise (the taker would reopen it past its end). Returns the row, or -1."""
        control, cost = self.control, self.cost
        taker = control.taker(self.w)
        if taker is None or len(cost) < 2:
            return -1
        b = self.cheapest(g.owned)
        if b < 0:
            return -1
        if 2 * cost[b] >= sum(cost.values()) - control.load_of(taker):
            return -1  # the taker would be the busier one: rows would only go back and forth
        with self.lock:
            if not control.commit(b, taker, k + 1):
                return -1
        return b

    def _release(self, g: HandedSchedule, b: int, k: int) -> None:
        """Hand row ``b`` over after batch ``k``, with its cursor there (as that batch's slot holds it)."""
        item, pos, state, flags = self.slot(k).cursor[b].tolist()
        g.drop(b)
        self.rows.drop(b)
        self.cost.pop(b, None)
        with self.lock:
            self.control.hand_over((item, pos, state, flags))
        if self.rows.tracer is not None:
            t = time.perf_counter()
            self.rows.tracer.complete("row move", t, t, {"row": b, "after_batch": k, "stream": item})

    def _adopt(self) -> None:
        """Take the row released to this producer, if it has been, into a group at its boundary."""
        with self.lock:
            got = self.control.arrived(self.w)
        if got is None:
            return
        b, at, cursor = got
        into = next((g for g in self.groups if g.k == at and g.opening is None), None)
        if into is None:
            into = self.template.alone(at)
            self.groups.append(into)
        into.adopt(b, cursor.tolist())
        self.changed = True
