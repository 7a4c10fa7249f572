"""The balanced policy's one protocol (``fills.writers.Balanced``): each producer writes the rows it owns, and a row
moves to an idle producer at a batch boundary, whether lengths are known (``fills.balanced``, every producer plans
every row) or not (``fills.handover``, each plans its own).

A producer takes its block of rows at the epoch's first piece of work. While another producer is idle it fills its
rows one by one, each timed: a row's cost is the seconds its last batch took to read (the reads its plan made
included, for a stream of unknown length), and a producer's load, the sum of its rows' costs, is published
(``Control.set_load``). The producer that holds the batch ``k`` everything waits for (``written_min() == k``)
offers its cheapest row to an idle producer if the move evens their loads out, never its last row nor one whose
stream broke its promise (its new owner would reopen it past its end and report it again): it commits the row
from ``k + 1`` (``Control.commit``), writes it through ``k`` and hands it over with its cursor there
(``hand_over``). The taker goes on with it from that boundary (``arrived``), reopening its stream where the cursor
says (``open(item, start=pos)``), as a resumed row does, so who writes a row never changes a byte. Costs differ
by orders of magnitude between streams, so the row that moves is chosen by time, not by count.
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
        self.cost: dict[int, float] = {}  # seconds the row's last timed batch took here, per row owned
        self.probed: dict[int, float] = {}  # seconds the plan of the batch being written spent reading each row
        self.steps = 0  # valid steps written, for the busy statistics
        self.set_up = False

    def take_block(self) -> None:
        """At the epoch's first piece of work: the rows of this producer's block become its own."""
        if not self.set_up:
            with self.lock:  # the lock orders owners between processes
                self.control.take_waiting(self.w, *self.block)
            self.set_up = True

    def arrived(self) -> tuple[int, int, np.ndarray] | None:
        """The row handed over to this producer, once its giver has released it: (row, the batch it goes on from,
        its cursor there)."""
        b, to, _ = self.control.moving
        if b < 0 or to != self.w:
            return None
        with self.lock:
            return self.control.arrived(self.w)

    def cheapest(self, mine: np.ndarray) -> int:
        """The cheapest of rows ``mine`` (a mask) that may move, or -1: a row of unknown cost never moves, nor one
        whose stream broke its promise, nor the last of them (the costliest stays)."""
        readers, cost = self.rows.readers, self.cost
        movable = [
            b for b in np.flatnonzero(mine).tolist() if cost.get(b, 0.0) > 0 and not (b in readers and readers[b].dead)
        ]
        return min(movable, key=lambda r: (cost[r], r)) if len(movable) >= 2 else -1

    def offer(self, mine: np.ndarray, k: int) -> int:
        """Commit the cheapest of rows ``mine`` to an idle producer from batch ``k + 1`` on, if every batch waits
        for this producer's batch ``k`` and the move evens the two producers' loads out. Returns the row, or -1."""
        control, cost = self.control, self.cost
        if control.written_min() != k:
            return -1
        taker = control.taker(self.w)
        if taker is None:
            return -1
        b = self.cheapest(mine)
        if b < 0 or 2 * cost[b] >= sum(cost.values()) - control.load_of(taker):
            return -1  # (else the taker would be the busier one: rows would only go back and forth)
        with self.lock:
            return b if control.commit(b, taker, k + 1) else -1

    def release(self, b: int, k: int) -> None:
        """Hand row ``b``, committed to another producer, over after batch ``k``, with its cursor there (as that
        batch's summary holds it)."""
        item, pos, state, flags = self.slot(k).cursor[b].tolist()
        self.rows.drop(b)
        self.cost.pop(b, None)
        with self.lock:
            self.control.hand_over((item, pos, state, flags))
        if self.rows.tracer is not None:
            t = time.perf_counter()
            self.rows.tracer.complete("row move", t, t, {"row": b, "after_batch": k, "stream": item})

    def write(self, part: BatchRuns, cols: list[int], read: set[tuple[int, int]] | None = None) -> None:
        """This producer's rows ``cols`` of batch ``part.k`` (the plan of those rows, ``read``: the runs its probes
        wrote): flags, data, summary, then their completion. While another producer is idle (only then may a row
        move) the rows are filled one by one, each timed."""
        v, rows, cost, probed = self.slot(part.k), self.rows, self.cost, self.probed
        self.faults.k = part.k
        write_flags(v, part, self.steps_t, cols)
        steps = rows.steps
        if self.control.idle_elsewhere(self.w):
            one = np.zeros(v.valid.shape[1], bool)
            short: set[int] = set()
            for b in cols:
                one[b] = True
                t0 = time.perf_counter()
                short |= rows.fill(v, part if len(cols) == 1 else part.only(one), read)
                cost[b] = probed.get(b, 0.0) + time.perf_counter() - t0
                one[b] = False
            self.control.set_load(self.w, sum(cost.values()))
        else:  # (one call: a row's own fill costs a pass over the plan)
            short = rows.fill(v, part, read)
        probed.clear()
        write_summary(v, part, short, cols)
        self.steps += rows.steps - steps
        self.control.set_written(cols, part.k + 1)
