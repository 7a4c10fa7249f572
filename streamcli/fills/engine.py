"""One producer of a loader: the interface the worker loop and the in-process path drive (``begin``, ``step``,
``fill_until``). Every epoch runs on the schedule (``fills.planned.Filler``), its writer policy chosen once, when its
tables are read (``fills.writers.choose``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec, Skip
from streamcli.shared.ring import Ring
from streamcli.source import StreamSource
from streamcli.trace import Tracer


class Engine:
    """Producer ``w`` of ``W`` (the main process is producer 0 of 1)."""

    def __init__(
        self,
        spec: FillSpec,
        source: StreamSource,
        items: Sequence[Any],
        ring: Ring,
        *,
        w: int,
        W: int,
        lock: AbstractContextManager[Any],
        on_skip: Callable[[Skip], None],
        tracer: Tracer | None = None,
    ) -> None:
        self.ring, self.w, self.gen = ring, w, -1
        self.filler = Filler(spec, source, items, ring, w, W, on_skip, lock)
        self.tracer = self.filler.rows.tracer = tracer
        self.filler.busy = lambda: ring.control.set_idle(w, False)  # (the balanced policy reads who is idle)

    @property
    def steps(self) -> int:
        """Valid steps written, for the busy statistics."""
        return self.filler.steps

    def begin(self, gen: int) -> None:
        """A new (or resumed) epoch: its policy is chosen at its first piece of work, once its tables are read."""
        self.gen = gen
        self.filler.begin(gen)

    def stop(self) -> None:
        """Produce nothing more until the next epoch (after an error)."""
        self.gen = self.filler.gen = -1

    def step(self) -> bool:
        """Do the most urgent piece of work that is handed out; False when there is nothing to do yet."""
        return self.filler.step()

    def fill_until(self, k: int) -> None:
        """The in-process path: produce until batch ``k`` is whole."""
        self.filler.fill_until(k)

    def reading(self) -> tuple[int, int]:
        """(stream, position) this producer reads, for the statistics and a dead worker's message."""
        return self.filler.reading()

    def idle(self) -> None:
        """Nothing to do: say so to the other producers, and that a death now is not a source's."""
        self.ring.control.set_idle(self.w, True)
        self.filler.mark[0] = -1

    def close(self) -> None:
        self.filler.close()
        if self.tracer is not None and self.tracer.parted:
            self.tracer.flush()
