"""One producer of a loader, whatever fills its batches: the interface the worker loop and the in-process path
drive (``begin``, ``step``, ``fill_until``), with the epoch's writer policy chosen once, when its tables are read
(``fills.writers.choose``).

A planned policy (whole batches, or fixed row blocks: any source, lengths known or not; or balanced ownership of
rows with every length known, ``fills.balanced``) runs the ``Schedule`` through ``fills.planned.Filler``; a
balanced epoch of lengths not all known still claims and moves rows at run time (``fills.claimed``).
Nothing outside this module knows there are two: ``benchmarks/ENGINE.md`` says how the second folds into the
first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from streamcli.fills.claimed.claim import close_rows
from streamcli.fills.claimed.produce import begin_epoch, fill, reading_of, set_idle, work
from streamcli.fills.claimed.rows import Producer
from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec, Skip
from streamcli.shared.control import NEVER
from streamcli.shared.ring import Ring
from streamcli.source import StreamSource, uses_blocks


class Engine:
    """Producer ``w`` of ``W`` (the main process is producer 0 of 1); ``rows``: the block of rows whose streams it
    reopens when a balanced epoch starts or resumes."""

    def __init__(
        self,
        spec: FillSpec,
        source: StreamSource,
        items: Sequence[Any],
        ring: Ring,
        *,
        w: int,
        W: int,
        rows: tuple[int, int],
        lock: AbstractContextManager[Any],
        on_skip: Callable[[Skip], None],
        parent_pid: int | None = None,
    ) -> None:
        self.ring, self.w, self.rows, self.gen = ring, w, rows, -1
        self.claimed = Producer(
            fill_spec=spec,
            source=source,
            items=items,
            ring=ring,
            w=w,
            lock=lock,
            gen=-1,
            parent_pid=parent_pid,
            blocks=uses_blocks(source),
            shared=W > 1,
        )
        self.claimed.on_skip = on_skip
        self.filler = Filler(spec, source, items, ring, w, W, on_skip, lock)
        self.filler.busy = lambda: set_idle(self.claimed, False)  # (the balanced policy's idle flag: ``idle``)
        self._planned = False  # the last piece of work ran on the planned policy

    @property
    def steps(self) -> int:
        """Valid steps written, for the busy statistics."""
        return self.claimed.steps + self.filler.steps

    def begin(self, gen: int) -> None:
        """A new (or resumed) epoch: its policy is chosen at its first piece of work, once its tables are read."""
        self.gen = gen
        begin_epoch(self.claimed, gen, *self.rows)
        self.filler.begin(gen)

    def stop(self) -> None:
        """Produce nothing more until the next epoch (after an error)."""
        self.gen = self.claimed.gen = -1

    def step(self) -> bool:
        """Do the most urgent piece of work that is handed out; False when there is nothing to do yet."""
        self._planned = self.filler.is_planned()
        return self.filler.step() if self._planned else work(self.claimed, NEVER)

    def fill_until(self, k: int) -> None:
        """The in-process path: produce until batch ``k`` is whole."""
        if self.filler.is_planned():
            self.filler.fill_until(k)
        else:
            fill(self.claimed, k)

    def reading(self) -> tuple[int, int]:
        """(stream, position) this producer reads, for the statistics and a dead worker's message."""
        return self.filler.reading() if self._planned else reading_of(self.claimed)

    def idle(self) -> None:
        """Nothing to do: say so to the other producers, and that a death now is not a source's."""
        set_idle(self.claimed, True)
        if self._planned:
            self.filler.mark[0] = -1

    def close(self) -> None:
        close_rows(self.claimed.rows.values())
        self.filler.close()
