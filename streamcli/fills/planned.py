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
from streamcli.scheduled import cursor as _cursor
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
        self._owners: dict[int, int] = {}  # ticket -> the producer reading its stream (``_deal``)
        self._blocks = split_rows(plan.batch_size, W)  # the row blocks resumed rows stay in
        self._live = [0] * W  # streams each producer is reading, as dealt
        self.steps = 0  # valid steps written

    def begin(self, gen: int) -> None:
        """A new epoch (or a resumed one): read its tables at the first piece of work."""
        self.gen, self.sched, self.planned, self._pending = gen, None, None, None
        self._owners.clear()
        self._live = [0] * self.W
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
                self.sched = Schedule(order, start, self.first, control.tickets, T=c.time_steps,
                                      pack=c.boundary == "pack", segment=c.segment,
                                      restream=c.epoch_end == "restream")  # fmt: skip
                reading = np.isin(start[:, 2], (_cursor.LIVE, _cursor.SHORT))  # resumed mid-stream: in their block
                self._live = [int(reading[lo:hi].sum()) for lo, hi in self._blocks]
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

    def _deal(self, plan: BatchRuns) -> None:
        """Deal the streams that start in this batch to the producers, in plan order, each to the one reading the
        fewest streams then (the lowest on a tie). Every producer deals every batch the same way, so all agree
        without a word; who reads a stream changes nothing in the batch. Rows resumed mid-stream (ticket -1) stay
        in the row blocks the workers reopened."""
        owners, live = self._owners, self._live
        for (_b, *_, fresh, _, _, _), t in zip(plan.runs, plan.run_tickets, strict=True):
            if fresh and t not in owners:
                o = min(range(self.W), key=lambda q: (live[q], q))
                owners[t] = o
                live[o] += 1
        for (b, _, n, _, p, _, _, stop, *_), t in zip(plan.runs, plan.run_tickets, strict=True):
            if p + n == stop:  # read to its end in this batch
                live[self._owner(t, b)] -= 1
        ends = (plan.stop - plan.pos == len(self.steps_t)).tolist()
        for b, t, end in zip(plan.whole.tolist(), plan.ticket.tolist(), ends, strict=True):
            if end:
                live[self._owner(t, b)] -= 1

    def _owner(self, ticket: int, b: int) -> int:
        if ticket < 0:
            return next(w for w, (lo, hi) in enumerate(self._blocks) if lo <= b < hi)
        return self._owners[ticket]

    def _fill_shared(self, v: Views, plan: BatchRuns) -> None:
        """With several workers, each reads the streams dealt to it (``_deal``) and writes their parts of the
        batch; a stream stays with one producer to its end."""
        assert self.rows is not None
        self._deal(plan)
        w, own = self.w, self._owner
        sel = np.asarray([i for i, (b, t) in enumerate(zip(plan.whole.tolist(), plan.ticket.tolist(), strict=True))
                          if own(t, b) == w], np.int64)  # fmt: skip
        runs = [r for r, t in zip(plan.runs, plan.run_tickets, strict=True) if own(t, r[0]) == w]
        pads = [p for p, t in zip(plan.pads, plan.pad_tickets, strict=True) if own(t, p[0]) == w]
        write_owned_flags(v, plan, sel, runs, pads, self.steps_t)
        short = self.rows.fill_parts(v, plan, sel, runs, pads)
        # A row's cursor and counts come from whoever read its last part in this batch.
        last: dict[int, tuple[int, int]] = {}
        for (b, t0, *_), t in zip(plan.runs, plan.run_tickets, strict=True):
            if t0 >= last.get(b, (-1, -1))[0]:
                last[b] = (t0, t)
        for (b, t0, _), t in zip(plan.pads, plan.pad_tickets, strict=True):
            if t0 >= last.get(b, (-1, -1))[0]:
                last[b] = (t0, t)
        mine = [b for b, (_, t) in last.items() if own(t, b) == w]
        mine.extend(plan.whole[sel].tolist())
        if mine:
            write_rows_summary(v, plan, np.asarray(sorted(mine), np.int64), short)
        self.steps += sum(r[2] for r in runs) + len(sel) * len(self.steps_t)
        self.ring.control.set_worker_done(w, plan.k)
