"""The balanced policy's one protocol (``fills.writers.Balanced``): each producer writes the rows it owns, and a row
moves to an idle producer at a batch boundary, whether every length is known (``fills.balanced``: every producer
plans every row) or not (``fills.handover``: each plans its own).

A row's cost is the seconds its last batch took to read (its plan's reads included), timed row by row while
another producer is idle; a producer's load, the seconds its last batch took, is published. The producer that has
just written the batch ``k`` everything waits for gives its cheapest row to an idle producer if the move lowers
the busier load, never its last row nor one whose stream broke its promise (the taker would reopen the stream past
where it broke). It marks its rows of ``k`` written first, then hands the row over with its cursor after ``k``
(``Control.hand_over``): the taker writes it from ``k + 1`` (its completion mark says so, and the hand-over's
batch), as a resumed row (``open(item, start=pos)``), so who writes a row changes no byte.
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
from streamcli.scheduled.plans import BatchRuns
from streamcli.shared.control import Control


class OwnedRows:
    """Producer ``w``'s rows under the balanced policy; ``block``: the rows it owns at the start."""

    def __init__(
        self,
        control: Control,
        rows: Rows,
        faults: Faults,
        slot: Callable[[int], Views],
        *,
        T: int,
        w: int,
        block: tuple[int, int],
        lock: AbstractContextManager[Any],
        busy: Callable[[], None],
    ) -> None:
        self.control, self.rows, self.faults, self.slot = control, rows, faults, slot
        self.w, self.block, self.lock, self.busy = w, block, lock, busy
        self.steps_t = np.arange(T, dtype=np.int64)
        self.cost: dict[int, float] = {}  # per row owned: the seconds its last timed batch took here
        self.probed: dict[int, float] = {}  # per row: the seconds the plan of the batch being written read it
        self.steps = 0  # valid steps written, for the busy statistics
        self.set_up = False

    def take_block(self) -> None:
        """At the epoch's first piece of work: the rows of this producer's block become its own."""
        if not self.set_up:
            with self.lock:  # the lock orders owners between processes
                self.control.take_waiting(self.w, *self.block)
            self.set_up = True

    def arrived(self) -> tuple[int, int, np.ndarray] | None:
        """The row handed over to this producer, once its giver has let it go: (row, the first batch this producer
        writes it in, its cursor there)."""
        b, to, _ = self.control.moving
        if b < 0 or to != self.w:
            return None
        with self.lock:
            return self.control.arrived(self.w)

    def write(self, part: BatchRuns, cols: list[int], read: set[tuple[int, int]] | None = None) -> int:
        """This producer's rows ``cols`` of batch ``part.k`` (``part``: their plan; ``read``: the runs its reads
        wrote already): flags, data, summary, then their completion, and a row handed over if one goes (-1 if
        none). While another producer is idle the rows are read one by one, each timed."""
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
        write_summary(v, part, short, cols)
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
        """(row, taker) if the cheapest of rows ``cols`` (the costliest stays) goes to an idle producer after batch
        ``k``: every batch waits for this producer's batch ``k``, and the move lowers the busier load. Else -1."""
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
