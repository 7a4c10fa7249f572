"""The balanced policy where lengths are not all known (``fills.writers.Balanced``, ``known=False``): each producer
plans the rows it owns, in groups that stand at different batches; rows move by the protocol of ``fills.owned``.

A stream of unknown length is read as its batch is planned, by the one producer that owns its row, so a producer
plans only its own rows, its claims by turns with the others' (``fills.turns``). A claim whose turn has not come
does not hold the producer: the rows whose claims wait split off into a group of their own (``scheduled.handed``),
resumed once their turn comes, while the other rows go on to later batches; groups merge again where they meet. A
row handed over to this producer joins a group at its boundary, set from its cursor there as a resumed row is. No
producer ever waits for another, so the turns cannot deadlock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views
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
        self.take_block()
        got = self.arrived()
        if got is not None:
            b, at, cursor = got
            into = next((g for g in self.groups if g.k == at and g.opening is None), None)
            if into is None:
                into = self.template.alone(at)
                self.groups.append(into)
            into.adopt(b, cursor.tolist())
            self.changed = True
        if self.changed and len(self.groups) > 1:
            self._merge()
        handed = self.control.handed
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
            mine, read = g.owned, self.rows.read
            gone = self.write(plan, np.flatnonzero(mine).tolist(), read)  # (a group plans its own rows only)
            self.rows.read = {r for r in read if not mine[r[0]]}  # (another group's reads wait for its plan)
            if gone >= 0:
                g.drop(gone)
            return True
        return False  # (the worker loop says so: ``Control.set_idle``, read by ``Control.taker``)

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
        """The group's next plan (None while a claim waits for its turn); the time its reads take is the rows'."""
        rows, probed = self.rows, self.probed
        rows.v, self.faults.k = self.slot(g.k), g.k

        def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
            t = time.perf_counter()
            got = rows.probe(b, item, pos, t0, n, fresh)
            probed[b] = probed.get(b, 0.0) + time.perf_counter() - t
            return got

        return g.try_plan(probe)
