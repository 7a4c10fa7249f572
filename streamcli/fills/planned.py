"""A producer on the planned path: batches filled from the schedule, whole or by rows, as they are handed out.

When every stream's length is known (``ClaimPlan.applies``), every producer computes the same ``Schedule`` and
follows it; nothing is claimed or balanced at run time. Random-access sources (``window(item)``) are filled
batch by batch: producer ``w`` of ``W`` fills every batch ``k`` with ``k % W == w`` whole, and marks it done
(``Control.set_done``). Iterator sources keep each stream in one process: the streams are dealt out to the
producers in plan order (each to the one reading the fewest), every producer writes the parts of each batch that
its streams cover, and marks its part done (``Control.set_worker_done``). Either way the loader waits for
``Control.batch_done(k)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.fills import iterators, windows
from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views, write_flags, write_owned_flags, write_rows_summary, write_summary
from streamcli.fills.spec import FillSpec, Skip
from streamcli.fills.transformed import Transformer, raw_fields
from streamcli.lives.control import Aborted
from streamcli.lives.ring import Ring
from streamcli.lives.tensors import split_rows
from streamcli.scheduled.claims import ClaimPlan
from streamcli.scheduled.schedule import BatchRuns, Schedule
from streamcli.source import StreamSource, has_window, uses_blocks


class Filler:
    """Producer ``w`` of ``W`` (the main process is producer 0 of 1)."""

    def __init__(self, plan: FillSpec, source: StreamSource, items: Sequence[Any], ring: Ring, w: int, W: int,
                 on_skip: Callable[[Skip], None]) -> None:  # fmt: skip
        self.config, self.ring, self.w, self.W = plan.config, ring, w, W
        self.faults = Faults(plan.plugin, source, items, plan.on_error, on_skip)
        self.mark = ring.control.mark_of(w)
        self.by_batch = has_window(source)
        tf = Transformer.of(plan, ring.control, self.faults.name)
        self.windows = windows.Windows(source, raw_fields(plan), self.faults, self.mark, tf) if self.by_batch else None
        self.rows = None if self.by_batch else iterators.Rows(source, plan.fields, uses_blocks(source), self.faults,
                                                              self.mark, tf)  # fmt: skip
        self.names = [f.name for f in plan.fields]
        self.steps_t = np.arange(plan.time_steps, dtype=np.int64)
        self.gen = -1
        self.sched: Schedule | None = None
        self.planned: bool | None = None  # decided when the epoch's tables are read
        self.first = 0
        self._pending: BatchRuns | None = None
        self._views: dict[int, Views] = {}
        self._blocks = split_rows(plan.batch_size, W)  # the row blocks resumed rows stay in
        self.steps = 0  # valid steps written

    def begin(self, gen: int) -> None:
        """A new epoch (or a resumed one): read its tables at the first piece of work."""
        self.gen, self.sched, self.planned, self._pending = gen, None, None, None
        self._views.clear()
        if self.rows is not None:
            self.rows.close()

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()

    def is_planned(self) -> bool:
        """Whether this epoch's claims follow from lengths (then this filler produces it)."""
        if self.planned is None:
            control = self.ring.control
            order, start = control.order_table(), control.cursors(0, self.config.batch_size).copy()
            self.planned = ClaimPlan.applies(order, start)
            if self.planned:
                c = self.config
                self.first = control.first_batch
                dealt = not self.by_batch and self.W > 1  # iterator streams are dealt to the producers
                self.sched = Schedule(order, start, self.first, control.tickets, T=c.time_steps,
                                      pack=c.boundary == "pack", segment=c.segment,
                                      restream=c.epoch_end == "restream",
                                      blocks=self._blocks if dealt else None)  # fmt: skip
        return self.planned

    def step(self) -> bool:
        """Fill the next batch this producer writes, if it is handed out; False when there is nothing to do yet."""
        control = self.ring.control
        if control.generation != self.gen:
            raise Aborted
        sched = self.sched
        assert sched is not None
        while True:
            plan = self._pending
            if plan is None:
                plan = self._pending = sched.next_plan()
            if not self.by_batch or plan.k % self.W == self.w:
                break
            self._pending = None  # another producer's batch: only the schedule moves past it
        if plan.k >= control.handed:
            return False
        self._fill(plan)
        self._pending = None
        return True

    def fill_until(self, k: int) -> None:
        """The in-process path: produce until batch ``k`` is whole."""
        control = self.ring.control
        t0, steps = time.perf_counter(), self.steps
        while not control.batch_done(k):
            if not self.step():  # pragma: no cover - one producer fills everything handed out
                raise RuntimeError(f"internal error: batch {k} cannot be completed")
        control.report(self.w, time.perf_counter() - t0, self.steps - steps, *self.reading())

    def reading(self) -> tuple[int, int]:
        return int(self.mark[0]), int(self.mark[1])

    def _slot(self, k: int) -> Views:
        slot = self.ring.control.slot_of(k)
        v = self._views.get(slot)
        if v is None:
            v = self._views[slot] = Views.of(self.ring.tb_slots[slot], self.names)
        return v

    def _fill(self, plan: BatchRuns) -> None:
        control = self.ring.control
        v = self._slot(plan.k)
        self.faults.k = plan.k
        if not self.by_batch and self.W > 1:
            return self._fill_shared(v, plan)
        # One producer fills the whole batch: from windows, or (in-process) from its rows' streams.
        write_flags(v, plan, self.steps_t)
        if self.windows is not None:
            short = windows.fill(v, plan, self.windows, self.faults, self.first)
        else:
            assert self.rows is not None
            short = self.rows.fill(v, plan)
        write_summary(v, plan, short)
        self.steps += len(plan.whole) * len(self.steps_t) + sum(r[2] for r in plan.runs)  # planned: statistics
        control.set_done(plan.k)

    def _fill_shared(self, v: Views, plan: BatchRuns) -> None:
        """With several workers, each reads the streams dealt to it (``Schedule``) and writes their parts of the
        batch, and the summary of the rows whose last part it read; a stream stays with one producer to its end."""
        assert self.rows is not None
        w = self.w
        sel = np.flatnonzero(plan.owner == w)
        runs = [r for r, o in zip(plan.runs, plan.run_owners, strict=True) if o == w]
        pads = [p for p, o in zip(plan.pads, plan.pad_owners, strict=True) if o == w]
        write_owned_flags(v, plan, sel, runs, pads, self.steps_t)
        short = self.rows.fill_parts(v, plan, sel, runs, pads)
        mine = np.flatnonzero(plan.last_owner == w)
        if len(mine):
            write_rows_summary(v, plan, mine, short)
        self.steps += sum(r[2] for r in runs) + len(sel) * len(self.steps_t)
        self.ring.control.set_worker_done(w, plan.k)
