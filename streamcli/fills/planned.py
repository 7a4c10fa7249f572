"""A producer: the batches it writes, planned by its ``Schedule`` and filled as they are handed out.

Who writes what is the epoch's writer policy (``fills.writers``). A stream of unknown length is read as its batch
is planned (``iterators.Rows.probe``), so such a batch is planned only once it is handed out.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills import iterators, windows, writers
from streamcli.fills.balanced import Balancer, Handover
from streamcli.fills.flags import Pad, Unread, Views, write_cursors, write_ids, write_marks
from streamcli.fills.iterators import ProducerTurns
from streamcli.fills.spec import Faults, FillSpec, Skip
from streamcli.fills.transformed import Transformer, raw_fields
from streamcli.scheduled.claims import ClaimOrder
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.schedule import BatchRuns, Schedule
from streamcli.shared.control import Aborted
from streamcli.shared.ring import Ring
from streamcli.source import StreamSource, has_window, uses_blocks


class Filler:
    """Producer ``w`` of ``W`` (the main process is producer 0 of 1)."""

    def __init__(
        self,
        fill_spec: FillSpec,
        source: StreamSource,
        items: Sequence[Any],
        ring: Ring,
        w: int,
        W: int,
        on_skip: Callable[[Skip], None],
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.config, self.ring, self.w, self.W = fill_spec.config, ring, w, W
        self.lock = lock or contextlib.nullcontext()  # orders the shared tickets (``fills.iterators``)
        self.faults = Faults(fill_spec.plugin, source, items, self.config.on_error, on_skip, stamps=fill_spec.stamps)
        self.mark = ring.control.mark_of(w)
        self.by_batch = has_window(source)
        tf = Transformer.of(fill_spec, ring.control, self.faults.name)
        self.windows = (
            windows.Windows(source, raw_fields(fill_spec), self.faults, self.mark, tf) if self.by_batch else None
        )
        self.rows = iterators.Rows(source, fill_spec.fields, uses_blocks(source), self.faults, self.mark, tf)
        self.opens = False  # this epoch has streams of unknown length: planning a batch reads them
        self.names = [f.name for f in fill_spec.fields]
        self.steps_t = np.arange(self.config.time_steps, dtype=np.int64)
        self.gen = -1
        self.sched: Schedule | None = None
        self.first = 0
        self._pending: BatchRuns | None = None
        self._views: dict[int, Views] = {}
        self.policy: writers.Planned | None = None  # who writes which rows of which batch, chosen per epoch
        self.owner: Balancer | Handover | None = None  # the rows this producer owns, under the balanced policy
        self.busy: Callable[[], None] = lambda: None  # tells the other producers this one is not idle
        self.steps = 0  # valid steps written
        self.unread: Unread | None = None  # in process, the last batch's flags written when first read

    def begin(self, gen: int) -> None:
        """A new epoch (or a resumed one): read its tables at the first piece of work."""
        self.gen, self.sched, self.policy, self._pending, self.owner = gen, None, None, None, None
        self._views.clear()
        self.rows.close()

    def _set_up(self) -> writers.Planned:
        """Read the epoch's tables (at its first piece of work: after a worker's acknowledgement); choose a policy."""
        control, c = self.ring.control, self.config
        # Ranks may share one schedule of G rows (the global batch); this rank writes its own from ``off``.
        G, off = control.schedule_rows
        order, start = control.order_table(), control.cursors(0, G).copy()
        known = ClaimOrder.applies(order, start)
        policy = self.policy = writers.choose(
            by_batch=self.by_batch,
            w=self.w,
            W=self.W,
            B=c.batch_size,
            known=known,
            balanced=control.balanced,
            fixed=c.balance is False,
        )
        self.opens, self.first = not known, control.first_batch
        turns = None
        if self.opens and self.W > 1:
            idle = functools.partial(control.set_idle, self.w, True)  # (waiting for its turn to claim)
            turns = ProducerTurns(control, self.lock, self.gen, self.mark, idle, lambda: self.busy())
        kw: dict[str, Any] = {"T": c.time_steps, "pack": c.boundary == "pack", "segment": c.segment}
        kw.update(restream=c.epoch_end == "restream", turns=turns)
        own: dict[str, Any] = {"w": self.w, "lock": self.lock, "busy": self.busy}  # (a balanced policy's)
        if isinstance(policy, writers.Balanced) and not policy.known:  # each producer plans the rows it owns
            assert c.batch_size == G, "ranks share a schedule only where every length is known"
            lo, hi = policy.block
            owned = np.zeros(G, bool)
            owned[lo:hi] = True
            handed = HandedSchedule(order, start, self.first, control.tickets, owned=owned, **kw)
            args = (control, handed, self.rows, self.faults, self._slot)
            self.owner = Handover(*args, **own)
            return policy
        lo, hi = policy.rows
        sched = self.sched = Schedule(order, start, self.first, control.tickets, rows=(lo + off, hi + off), **kw)
        if isinstance(policy, writers.Balanced):  # (it plans every row itself and moves rows)
            self.owner = Balancer(control, sched, self.rows, self.faults, self._slot, **own)
        return policy

    def step(self) -> bool:
        """Fill the next batch this producer writes, if it is handed out; False when there is nothing to do yet."""
        control = self.ring.control
        if control.generation != self.gen:
            raise Aborted
        policy = self.policy or self._set_up()
        if self.owner is not None:
            steps = self.owner.steps
            did = self.owner.step()
            self.steps += self.owner.steps - steps
            return did
        sched = self.sched
        assert sched is not None
        while True:
            plan = self._pending
            if plan is None:
                if self.opens and sched.k >= control.handed:  # planning reads into the batch: once it is handed out
                    return False
                plan = self._pending = self._plan(sched, self._slot)
            if policy.writes(plan.k):
                break
            self._pending = None  # another producer's batch: only the schedule moves past it
        if plan.k >= control.handed:
            return False
        v = self._slot(plan.k)
        write_cursors(v, plan, self._fill(v, plan))  # the loader of workers reads the rows' cursors from the slot
        policy.done(control, plan.k)
        self._pending = None
        return True

    def fill_batch(self, slot: int) -> tuple[BatchRuns, set[int]]:
        """In process, a function call: plan the next batch and fill it into ``slot``, publishing and marking nothing.
        Returns its plan and the rows whose stream ended before its promise; ``unread`` writes its ids."""
        if self.policy is None:
            self._set_up()
        sched = self.sched
        assert sched is not None and self.W == 1
        v = self._views_of(slot)
        v.padded = padded = list[Pad]()  # (its fill's padding, for ``Unread``)
        plan = self._plan(sched, lambda k: v)
        short = self._fill(v, plan)
        self.unread = Unread(v, plan, self.steps_t, padded)
        return plan, short

    def _plan(self, sched: Schedule, views: Callable[[int], Views]) -> BatchRuns:
        """The schedule's next batch; where lengths are unknown planning reads streams into its slot, ``views(k)``."""
        if not self.opens:
            return sched.next_plan()
        self.rows.v, self.faults.k = views(sched.k), sched.k
        return sched.next_plan(self.rows.probe)

    def stop(self) -> None:
        """Produce nothing more until the next epoch (after an error)."""
        self.gen = -1

    def idle(self) -> None:
        """Nothing to do: say so to the other producers, and that a death now is not a source's."""
        self.ring.control.set_idle(self.w, True)
        self.mark[0] = -1

    def end(self) -> None:
        """The producer's last act: close its streams and write out its trace."""
        self.rows.close()
        if self.rows.tracer is not None and self.rows.tracer.parted:
            self.rows.tracer.flush()

    def _slot(self, k: int) -> Views:
        return self._views_of(self.ring.control.slot_of(k))

    def _views_of(self, slot: int) -> Views:
        v = self._views.get(slot)
        if v is None:
            assert self.policy is not None
            v = self._views[slot] = Views.of(self.ring.tb_slots[slot], self.names).columns(*self.policy.rows)
        return v

    def _fill(self, v: Views, plan: BatchRuns) -> set[int]:
        """Batch ``plan.k`` into ``v`` (ids left to ``Unread`` where ``v.padded``); rows whose stream broke promise."""
        self.faults.k = plan.k
        write_marks(v, plan)
        if v.padded is None:  # (before the fill: padding it finds overwrites them)
            write_ids(v, plan, self.steps_t)
        if self.windows is not None and isinstance(self.policy, writers.WholeBatches):
            tracer = self.rows.tracer
            t0 = time.perf_counter() if tracer is not None else 0.0
            short = windows.fill(v, plan, self.windows, self.faults, self.first)
            if tracer is not None:  # (a random-access source's reads: its windows, no stream opened)
                tracer.read(plan.k, t0, time.perf_counter(), len(plan.whole) + len(plan.runs))
        else:
            short = self.rows.fill(v, plan, self.rows.read)
            self.rows.read.clear()
        self.steps += len(plan.whole) * len(self.steps_t) + sum(r[2] for r in plan.runs)  # planned: statistics
        return short
