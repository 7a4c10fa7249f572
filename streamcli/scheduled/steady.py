"""The schedule's cheap path: batches in which every row goes on reading its stream, planned without the full pass.

``Schedule.close_batch`` plans any batch with a few dozen array operations, whatever the batch size; at small B
each costs what a Python loop over every row would. Most batches change nothing but the positions: every row the
schedule plans is ``LIVE`` and its stream goes on past the batch's end, and none of them claims in it. After each
full pass the schedule counts how many of the next batches are such (``_measure``, from the rows' steps left; a
stream of unknown length counts as going on, and the batch's reads say when it does not); it plans those from
arrays that stay the same for the whole stretch (``_steady``). The plans are equal either way
(``tests/test_steady.py``).
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.plans import BatchRuns, RowColumns

LIVE = int(RowPhase.LIVE)
FOREIGN = -1  # a row another producer plans (``scheduled.handed``): no claim, no run, no cursor of it here


class SteadyStretch(RowColumns):
    """The stretch's state (the row columns are ``scheduled.schedule.Schedule``'s)."""

    STRETCHES = True  # (tests turn it off to compare the steady plans with the full pass)
    k: int
    left = 0  # batches from the next one on in which every row goes on reading its stream
    _same: BatchRuns | None = None  # the stretch's unchanging parts (its ``pos`` and ``k`` unused)

    def _measure(self) -> None:
        """How many of the next batches are steady: every row planned here live, and each stream more than T
        steps from its end at the batch's start (a stream ending in the batch changes its row's state)."""
        self._same, self.left = None, 0
        state = self.state
        owned = state != FOREIGN
        if self.STRETCHES and owned.any() and bool((state[owned] == LIVE).all()):
            self.left = (int((self.stop - self.pos)[owned].min()) - 1) // self.T

    def _steady(self) -> BatchRuns:
        same = self._same
        if same is None:
            whole = np.flatnonzero(self.state != FOREIGN)
            cursors = np.zeros((self.B, _cursor.WIDTH), np.int64)
            cursors[:, _cursor.ITEM] = self.item
            cursors[:, _cursor.STATE] = self.state
            cursors[:, _cursor.FLAGS] = self.replay * _cursor.REPLAYED
            if self.segment:  # an item of unknown length cut into segments: its row says so
                cursors[:, _cursor.FLAGS] += (self.expect < 0) * _cursor.OPEN_ENDED
            zeros = np.zeros(self.B, np.int64)
            same = self._same = BatchRuns(
                k=-1,
                whole=whole,
                item=self.item[whole],
                pos=whole,
                replay=self.replay[whole] != 0,
                stop=self.stop[whole],
                expect=self.expect[whole],
                seg_end=self.seg_end[whole],
                runs=[],
                pads=[],
                cursors=cursors,
                claims=zeros,
                dry=zeros,
            )
        whole, pos = same.whole, self.pos
        at = pos[whole]
        pos[whole] += self.T
        cursors = same.cursors.copy()
        cursors[:, _cursor.POS] = pos
        k = self.k
        self.k, self.left = k + 1, self.left - 1
        return BatchRuns(
            k=k,
            whole=whole,
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
