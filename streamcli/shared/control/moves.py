"""The control block's hand-overs: a live row moving from a busy producer to an idle one, under the balanced policy
of lengths not all known (``fills.handover``).

An idle producer says so (``Reports.set_idle``); the producer every batch waits for commits to give it a row from the
boundary after the batch it is about to write (``commit``), writes the row until then, and hands it over with its
cursor there (``hand_over``); the idle producer adopts it at that boundary (``arrived``), in a schedule of its own
(``scheduled.handed``). One hand-over is in flight at a time. Every mutator holds the lock; the readers
(``moving``) read single values, and a stale read only makes a producer look again.
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.layout import Arrays


class Moves(Arrays):
    """Hand-overs of live rows between producers, at a batch boundary the giver chooses."""

    def reset_moves(self) -> None:
        """No row moves (an epoch starts)."""
        self._ctl.move_row = -1

    def taker(self, w: int) -> int | None:
        """An idle producer other than ``w`` (its flag in the reports), if no hand-over is in flight (hold the lock)."""
        if self._ctl.move_row >= 0:
            return None
        idle = self._wstat.idle.copy()
        idle[w] = 0
        found = np.flatnonzero(idle)
        return int(found[0]) if len(found) else None

    def commit(self, b: int, to: int, k: int) -> bool:
        """Row ``b`` goes to producer ``to`` from batch ``k`` on, if ``to`` is still idle and no other row is moving
        (hold the lock)."""
        ctl = self._ctl
        if ctl.move_row >= 0 or not self._wstat.idle[to]:
            return False
        ctl.move_row, ctl.move_to, ctl.move_at = b, to, k
        return True

    @property
    def moving(self) -> tuple[int, int, int]:
        """(row, to, batch) of the hand-over in flight; row -1 when none."""
        ctl = self._ctl
        return ctl.move_row, ctl.move_to, ctl.move_at

    def hand_over(self, cursor: tuple[int, int, int, int]) -> None:
        """The giver has written the moving row up to the boundary: its cursor there (hold the lock)."""
        ctl = self._ctl
        b = ctl.move_row
        self._held[b] = cursor
        self._rows.owner[b] = ctl.move_to  # last: a taker that sees itself the owner sees the cursor

    def arrived(self, w: int) -> tuple[int, int, np.ndarray] | None:
        """(row, batch, its cursor there) if a row coming to producer ``w`` has been released (hold the lock); the
        hand-over is over then."""
        ctl = self._ctl
        b = ctl.move_row
        if b < 0 or ctl.move_to != w or int(self._rows.owner[b]) != w:
            return None
        ctl.move_row = -1
        ctl.moved += 1
        held: np.ndarray = self._held[b].copy()
        return b, int(ctl.move_at), held
