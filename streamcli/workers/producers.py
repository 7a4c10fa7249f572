"""A loader's producers behind one interface: the main process itself (``num_workers=0``), or a pool of worker
processes. Either fills the batches handed out in the ring; the loader only asks for batch k and waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.caller import at_user_line
from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec, Skip
from streamcli.scheduled.plans import BatchRuns
from streamcli.shared.ring import Ring
from streamcli.source import StreamSource, item_name
from streamcli.trace import Tracer
from streamcli.workers.pool import WorkerPool
from streamcli.workers.start import check_main_guard, check_picklable
from streamcli.workers.worker import WorkerSpec


class InProcess:
    """The main process fills each batch when the consumer asks for it: a function call, no protocol."""

    pool: WorkerPool | None = None

    def __init__(
        self,
        spec: FillSpec,
        source: StreamSource,
        items: Sequence[Any],
        ring: Ring,
        on_skip: Callable[[Skip], None],
        tracer: Tracer | None = None,
    ) -> None:
        self.filler = Filler(spec, source, items, ring, 0, 1, on_skip)
        self.filler.rows.tracer = tracer  # the consumer's own: one process, one list of events
        self.filler.rows.steps_marked = False  # no worker's death or stall to name a step: the row is marked once
        self.busy_s = 0.0  # seconds spent filling, for the statistics

    def start_epoch(self, gen: int, timeout: float | None) -> None:
        return None  # nothing runs between batches

    def begin(self, gen: int) -> None:
        self.filler.begin(gen)

    def fill(self, slot: int) -> tuple[BatchRuns, set[int]]:
        """Plan and fill the next batch into ``slot``: its plan, and the rows whose stream broke its promise."""
        t0 = time.perf_counter()
        made = at_user_line(lambda: self.filler.fill_batch(slot))
        t1 = time.perf_counter()
        self.busy_s += t1 - t0
        tracer = self.filler.rows.tracer
        if tracer is not None:
            tracer.fill(t0, t1)
        return made

    def busy(self) -> np.ndarray:
        return np.array([self.busy_s])

    def steps(self) -> tuple[int, ...]:
        return (self.filler.steps,)

    def ready_batches(self, k: int) -> int:
        return 0

    def close(self) -> None:
        self.filler.end()


class Workers:
    """Worker processes fill batches ahead of the consumer, within the hand-out window."""

    def __init__(
        self,
        spec: FillSpec,
        source: StreamSource,
        items: Sequence[Any],
        ring: Ring,
        bounds: Sequence[tuple[int, int]],
        mp_context: str,
        on_skip: Callable[[Skip], None],
    ) -> None:
        if mp_context != "fork":
            check_main_guard()
        check_picklable(source, items, spec)
        env = dict(os.environ)
        specs = [
            WorkerSpec(w=w, fill_spec=spec, ring=ring.spec, source=source, items=list(items), env=env)
            for w in range(len(bounds))
        ]
        self.pool = WorkerPool(specs, ring, mp_context, lambda i: item_name(source, items[i]))
        self.pool.on_skip = on_skip
        self.control = ring.control

    def busy(self) -> np.ndarray:
        return self.control.busy()

    def steps(self) -> tuple[int, ...]:
        return self.control.steps()

    def start_epoch(self, gen: int, timeout: float | None) -> None:
        self.pool.start_epoch(gen, timeout)

    def begin(self, gen: int) -> None:
        return None  # each worker begins when it acknowledges the epoch (``start_epoch``)

    def wait(self, k: int, timeout: float | None, stop: Callable[[], bool] | None) -> bool:
        return self.pool.wait_batch(k, timeout, stop)

    def ready_batches(self, k: int) -> int:
        return self.pool.ready_batches(k)

    def close(self) -> None:
        return None  # the loader's finalizer stops the pool (``pool.shutdown``): it must not hold the loader
