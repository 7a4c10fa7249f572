"""Every global row's cursor at any batch of an epoch, for a rank that writes only its own rows of it.

Ranks share one schedule (``scheduled.epochs``), so what every other rank's rows hold after batch ``k`` follows
from the lengths alone: the schedule of all rows is run along, lazily, to the batch a state is asked at. The rank's
own rows are taken from what its producers wrote (a stream that fell short of its promise says so there).
"""

from __future__ import annotations

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.scheduled.schedule import Schedule


class World:
    """The global rows of an epoch that starts (or resumes) at batch ``first`` from ``cursors`` after ``tickets``
    tickets, the epoch's streams being ``order`` (the ring's order table)."""

    def __init__(self, order: np.ndarray, cursors: np.ndarray, first: int, tickets: int, config: LoaderConfig) -> None:
        self._start, self.config = (order, cursors.copy(), first, tickets), config
        self._sched: Schedule | None = None
        self._at = (first, tickets, cursors.copy())  # (batch, tickets, cursors) before that batch

    def at(self, batch: int, own: np.ndarray, offset: int) -> tuple[int, np.ndarray]:
        """(tickets, every row's cursor) right before ``batch``, with ``own`` for the rows from ``offset``."""
        if batch < self._at[0]:  # (not within one epoch's run; planned again from its start)
            _, cursors, first, tickets = self._start
            self._sched, self._at = None, (first, tickets, cursors.copy())
        if self._sched is None:
            c = self.config
            pack, restream = c.boundary == "pack", c.epoch_end == "restream"
            self._sched = Schedule(*self._start, T=c.time_steps, pack=pack, segment=c.segment, restream=restream)
        sched = self._sched
        while self._at[0] < batch:
            plan = sched.next_plan()
            self._at = (plan.k + 1, sched.claim_order.taken, plan.cursors)
        cursors = self._at[2].copy()
        cursors[offset : offset + len(own)] = own
        return self._at[1], cursors
