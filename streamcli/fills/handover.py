"""The balanced policy when lengths are not all known (``fills.writers.Balanced``, ``known=False``): rows move from
the producer everything waits for to an idle one, at a batch boundary the idle one can plan from.

A stream of unknown length is read as its batch is planned, by the one producer that owns its row, so a producer
plans only its own rows (``scheduled.handed``), its claims by turns with the others' (``fills.turns``). Its schedule
stands at one batch, so it can take a row only there: an idle producer says where it waits (``Control.wait_at``);
the producer that holds the batch every row waits for commits its cheapest row to it (measured: the seconds the row
took in its last batch, reading included), goes on writing that row up to the boundary, then releases it with its
cursor there; the idle producer adopts the row as a resumed one (``open(item, start=pos)``) and writes it from the
boundary on. The giver never waits for the taker (every key the taker holds lies at or past the boundary), so the
hand-over cannot deadlock the turns, and who writes a row never changes a byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views, write_flags, write_summary
from streamcli.fills.iterators import Rows
from streamcli.fills.open_streams import OpenStreams
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.plans import BatchRuns
from streamcli.shared.control import Control


class Handover:
    """Producer ``w``'s side of such an epoch, planned by ``sched``; ``block``: the rows it owns at the start."""

    def __init__(
        self,
        control: Control,
        sched: HandedSchedule,
        rows: Rows,
        streams: OpenStreams,
        faults: Faults,
        slot: Callable[[int], Views],
        *,
        w: int,
        block: tuple[int, int],
        lock: AbstractContextManager[Any],
        busy: Callable[[], None],
    ) -> None:
        self.control, self.sched, self.rows, self.streams = control, sched, rows, streams
        self.faults, self.slot = faults, slot
        self.w, self.block, self.lock, self.busy = w, block, lock, busy
        self.mine = np.zeros(sched.B, bool)
        self.mine[block[0] : block[1]] = True
        self.steps_t = np.arange(sched.T, dtype=np.int64)
        self.cost: dict[int, float] = {}  # seconds the row's last batch took here, reading included
        self.steps = 0  # valid steps written, for the busy statistics
        self.waiting = False  # this producer has said where it waits (``Control.wait_at``)
        self.last: dict[int, float] = {}  # ``cost`` after the last batch written
        self.giving = -1  # the row committed to another producer, written here until ``give_at``
        self.give_at = -1
        self.give_cursor = (0, 0, 0, 0)  # its cursor at ``give_at``, as that batch's summary holds it
        self.set_up = False

    def step(self) -> bool:
        """Write this producer's rows of its next batch if it is handed out; False when there is nothing to do."""
        control, sched, w = self.control, self.sched, self.w
        if not self.set_up:
            with self.lock:
                control.take_waiting(w, *self.block)  # (the owner column says who holds a row, for a hand-over)
            self.set_up = True
        k = sched.k
        b, to, at = control.moving
        if b >= 0 and to == w and at == k and not self._adopt():
            return False  # a row comes here at this batch: it is planned with it
        if k >= control.handed:
            if not self.waiting:
                control.wait_at(w, k)
                self.waiting = True
            return False
        if self.waiting:
            with self.lock:
                if not control.stop_waiting(w):
                    return False
            self.waiting = False
        self.busy()
        behind = control.written_min() == k  # this producer holds the batch every row waits for
        plan = self._plan(k)
        if self.giving < 0 and behind:
            self._offer(k)
        self._write(plan)
        if self.giving >= 0 and self.give_at == k + 1:
            self._release()
        return True

    def wait_past(self, key: int) -> None:
        """This producer waits for its turn to claim at ``key``: a row may be handed to it from the next batch on."""
        sched = self.sched
        if not self.waiting:
            self.control.wait_at(self.w, key // (sched.T * sched.B) + 1)
            self.waiting = True

    def _plan(self, k: int) -> BatchRuns:
        streams, cost = self.streams, self.cost
        streams.v, self.faults.k = self.slot(k), k
        for b in cost:
            cost[b] = 0.0

        def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
            t = time.perf_counter()
            got = streams.probe(b, item, pos, t0, n, fresh)
            cost[b] = cost.get(b, 0.0) + time.perf_counter() - t
            return got

        return self.sched.next_plan(probe)

    def _write(self, plan: BatchRuns) -> None:
        """This producer's rows of batch ``plan.k``: data, flags and summary, then their completion. While another
        producer waits for a row (only then may one move) the rows are filled one by one, each timed."""
        v, mine, read = self.slot(plan.k), self.mine, self.streams.read
        cols = np.flatnonzero(mine).tolist()
        part = plan.only(mine)
        write_flags(v, part, self.steps_t, cols)
        steps = self.rows.steps
        if len(cols) > 1 and self.control.waiting_elsewhere(self.w):
            one = np.zeros(len(mine), bool)
            short: set[int] = set()
            for b in cols:
                one[b] = True
                t0 = time.perf_counter()
                short |= self.rows.fill(v, plan.only(one), read)
                self.cost[b] = self.cost.get(b, 0.0) + time.perf_counter() - t0
                one[b] = False
        else:
            short = self.rows.fill(v, part, read)
        read.clear()
        write_summary(v, part, short, cols)
        self.steps += self.rows.steps - steps
        self.last = dict(self.cost)
        if self.giving >= 0 and self.give_at == plan.k + 1:  # (read before the batch can be taken and recycled)
            item, pos, state, flags = v.cursor[self.giving].tolist()
            self.give_cursor = (item, pos, state, flags)
        self.control.set_written(cols, plan.k + 1)

    def _offer(self, k: int) -> None:
        """Commit this producer's cheapest row (by its last batch) to a producer that waits past batch ``k``, if one
        does; never the last row, nor one whose stream broke its promise (the taker would reopen it past its end)."""
        taker = self.control.taker(self.w, k)
        if taker is None or self.mine.sum() < 2:
            return
        readers, last = self.rows.readers, self.last
        movable = [
            b
            for b in np.flatnonzero(self.mine).tolist()
            if last.get(b, 0.0) > 0 and not (b in readers and readers[b].dead)
        ]
        if len(movable) < 2:  # a row of unknown cost never moves, and the costliest stays
            return
        b = min(movable, key=lambda r: (last[r], r))
        to, at = taker
        with self.lock:
            if not self.control.commit(b, to, at):
                return
        self.giving, self.give_at = b, at

    def _release(self) -> None:
        """Hand the committed row over at ``give_at``, with its cursor there."""
        b = self.giving
        self.sched.drop(b)
        self.rows.drop(b)
        self.streams.drop(b)
        self.mine[b] = False
        self.cost.pop(b, None)
        with self.lock:
            self.control.hand_over(self.give_cursor)
        self.giving = self.give_at = -1

    def _adopt(self) -> bool:
        """Take the row released to this producer, if it has been: planned here from the next batch on."""
        with self.lock:
            got = self.control.arrived(self.w, self.sched.k)
        if got is None:
            return False
        b, cursor = got
        self.sched.adopt(b, cursor.tolist())
        self.mine[b] = True
        self.waiting = False
        return True
