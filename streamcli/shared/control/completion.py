"""The control block's completion marks: when batch k is whole, and the wake-up of a loader blocked on it.

A batch is whole by one of three marks, one per writer policy (``fills.writers``), and ``batch_done`` reads all
three so that the loader need not know which policy the epoch runs: ``done`` (``WholeBatches``, and
``RowBlocks`` with one producer: that producer filled it whole), ``wdone`` (``RowBlocks`` with several: every
producer has written its block of rows) and the rows' ``written`` (``Balanced``: every row has
completed it).
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.layout import SMALL, Arrays


class Completion(Arrays):
    """Which batches are whole, and the batch the loader waits for."""

    def await_batch(self, k: int) -> None:
        """The loader is about to block until batch ``k`` is whole (-1: it is not blocked)."""
        self._ctl.awaited = k

    def wake_due(self) -> bool:
        """Whether the batch the loader is blocked on is whole; the first producer to see it clears the mark and
        wakes the loader (a second wake-up is harmless)."""
        k = self._ctl.awaited
        if k < 0 or not self.batch_done(k):
            return False
        self._ctl.awaited = -1
        return True

    def set_done(self, k: int) -> None:
        """Batch ``k`` is whole, filled by one producer (the planned path's random-access sources)."""
        self._done[k % len(self._done)] = k + 1

    def batch_done(self, k: int) -> bool:
        """Whether batch ``k`` is whole: every row has completed it, one producer filled it whole, or every
        producer has done its part of it (``set_worker_done``)."""
        return int(self._done[k % len(self._done)]) == k + 1 or self.written_min() > k or int(self._wdone.min()) > k

    def set_worker_done(self, w: int, k: int) -> None:
        """Producer ``w`` has written its rows of batch ``k`` (and of every batch before it)."""
        self._wdone[w] = k + 1

    def done_after(self, k: int) -> int:
        """Batches after ``k`` that are already whole."""
        n = 0
        while n < len(self._done) and self.batch_done(k + 1 + n):
            n += 1
        return n

    def written_min(self) -> int:
        """Batches that every row has completed: batch k is whole once this exceeds k."""
        written = self._rows.written
        return min(written.tolist()) if len(written) <= SMALL else int(np.minimum.reduce(written))
