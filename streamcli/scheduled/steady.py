"""The schedule's cheap path: batches in which every row goes on reading its stream, planned without the full pass.

``Schedule.next_plan`` plans any batch with a few dozen array operations, whatever the batch size; at small B
each costs what a Python loop over every row would. Most batches change nothing but the positions: every row
is ``LIVE`` and its stream goes on past the batch's end, and no claim falls in it. ``Steady`` wraps a
``Schedule`` and counts how many of the next batches are such (from the rows' steps left, after each full
plan); it plans those from arrays that stay the same for the whole stretch, and hands every other batch to
the ``Schedule``. The plans are equal either way (``tests/test_steady.py``).
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.open_rows import Probe
from streamcli.scheduled.schedule import LIVE, BatchRuns, Schedule


class Steady:
    """``sched``'s plans, the steady ones made here. Its plans share the arrays that do not change within a
    stretch: a filler reads a plan and never writes into it."""

    def __init__(self, sched: Schedule) -> None:
        self.sched = sched
        self.left = 0  # batches from the next one on in which every row goes on reading its stream
        self._same: BatchRuns | None = None  # the stretch's unchanging parts (its ``pos`` and ``k`` unused)

    @property
    def k(self) -> int:
        return self.sched.k

    def next_plan(self, probe: Probe | None = None) -> BatchRuns:
        """The plan of the next batch; the rows' state moves past it. ``probe``: streams of unknown length are read
        as the batch is planned (``scheduled.open_rows``), which only the full pass does."""
        s = self.sched
        if probe is not None:
            self.left = 0
            return s.next_plan(probe)
        if self.left > 0:
            heap = s.claim_order._heap
            if not heap or heap[0][0] >= (s.k + 1) * s.T * s.B_all:  # no claim in it, not even another producer's
                self.left -= 1
                return self._steady()
        plan = s.next_plan()
        self._measure()
        return plan

    def _measure(self) -> None:
        """How many of the next batches are steady: every row live, and each stream more than T steps from its
        end at the batch's start (a stream ending in the batch changes its row's state)."""
        s = self.sched
        self._same = None
        if s.B and bool((s.state == LIVE).all()):  # (rows of unknown length are planned with a probe: never here)
            self.left = (int((s.stop - s.pos).min()) - 1) // s.T
        else:
            self.left = 0

    def _steady(self) -> BatchRuns:
        s = self.sched
        same = self._same
        if same is None:
            whole = np.arange(s.B, dtype=np.int64)
            cursors = np.empty((s.B, _cursor.WIDTH), np.int64)
            cursors[:, _cursor.ITEM] = s.item
            cursors[:, _cursor.STATE] = s.state
            cursors[:, _cursor.FLAGS] = s.replay * _cursor.REPLAYED
            zeros = np.zeros(s.B, np.int64)
            same = self._same = BatchRuns(
                k=-1,
                whole=whole,
                item=s.item.copy(),
                pos=whole,
                replay=s.replay != 0,
                stop=s.stop.copy(),
                expect=s.expect.copy(),
                seg_end=s.seg_end.copy(),
                runs=[],
                pads=[],
                cursors=cursors,
                claims=zeros,
                dry=zeros,
            )
        pos = s.pos
        at = pos.copy()
        pos += s.T
        cursors = same.cursors.copy()
        cursors[:, _cursor.POS] = pos
        k = s.k
        s.k = k + 1
        return BatchRuns(
            k=k,
            whole=same.whole,
            item=same.item,
            pos=at,
            replay=same.replay,
            stop=same.stop,
            expect=same.expect,
            seg_end=same.seg_end,
            runs=[],
            pads=[],
            cursors=cursors,
            claims=same.claims,
            dry=same.dry,
        )
