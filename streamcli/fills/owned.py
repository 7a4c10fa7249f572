"""What both forms of the balanced policy share (``fills.balanced``, every length known; ``fills.handover``, not all
known): a producer that writes the rows it owns, takes its block of them at the epoch's first piece of work, keeps
each row's measured cost, and offers the cheapest of its rows when another producer is idle.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.fills.faults import Faults
from streamcli.fills.flags import Views
from streamcli.fills.iterators import Rows
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
        self.cost: dict[int, float] = {}  # seconds the row's last batch took here (as each policy measures it)
        self.steps = 0  # valid steps written, for the busy statistics
        self.set_up = False

    def take_block(self) -> None:
        """At the epoch's first piece of work: the rows of this producer's block become its own."""
        if not self.set_up:
            with self.lock:  # the lock orders owners between processes
                self.control.take_waiting(self.w, *self.block)
            self.set_up = True

    def cheapest(self, mine: np.ndarray, least: int = 1) -> int:
        """The cheapest of rows ``mine`` (a mask) by measured cost, or -1 if fewer than ``least`` may move: a row of
        unknown cost never moves, nor one whose stream broke its promise (its new owner would reopen it past its
        end and report it again)."""
        readers, cost = self.rows.readers, self.cost
        movable = [
            b for b in np.flatnonzero(mine).tolist() if cost.get(b, 0.0) > 0 and not (b in readers and readers[b].dead)
        ]
        return min(movable, key=lambda r: (cost[r], r)) if len(movable) >= max(least, 1) else -1
