"""The control block's rows: which producer owns each row, the key of its next possible claim and the batches it
has completed, and the rows given up mid-stream for an idle producer to go on with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.shared.control.layout import NEVER, NO_OWNER, Arrays, given_by


class RowOwners(Arrays):
    """Rows given between producers, and every row's next claim key (see ``Control``)."""

    def earliest_claim(self) -> int:
        """The smallest key any row may still claim at, read in one pass. Keys only grow within an epoch, so the
        minimum of one pass never exceeds the true one. (An argmin, then a second read of that row, may: the row can
        publish a later key between the two reads while another row still waits below it.)"""
        return int(self._rows.claim.min())

    def give_row(self, b: int, w: int, cursor: tuple[int, int, int, int]) -> None:
        """Producer ``w`` gives live row ``b`` up mid-stream, at a batch boundary (its completed batches say which),
        for an idle producer to go on with (hold the lock). Its claim key stays as announced: the row takes no
        ticket, it only changes hands."""
        self._held[b] = cursor
        self._rows.owner[b] = given_by(w)  # not NO_OWNER: the row is not waiting for a claim
        self._ctl.given += 1
        self._ctl.moved += 1

    @property
    def given(self) -> int:
        """Rows given up mid-stream that no producer has taken yet (a cheap check before ``take_given``)."""
        return self._ctl.given

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return self._ctl.moved

    def take_given(self, w: int, top: int, own: bool) -> tuple[int, np.ndarray] | None:
        """Make producer ``w`` the owner of the earliest row given up mid-stream whose next batch is below
        ``top`` (hold the lock): (row, its cursor), or None. Rows ``w`` gave up itself only if ``own``: a giver
        takes one back only when it has nothing else to do, never before the idle producer can."""
        owner, written = self._rows.owner, self._rows.written
        given = owner <= given_by(0)
        if not own:
            given &= owner != given_by(w)
        rows = np.flatnonzero(given & (written < top))
        if not len(rows):
            return None
        b = int(rows[np.argmin(written[rows])])
        owner[b] = w
        self._ctl.given -= 1
        held: np.ndarray = self._held[b].copy()
        return b, held

    def take_waiting(self, w: int, lo: int, hi: int) -> None:
        """Make producer ``w`` the owner of the rows ``lo .. hi-1`` that wait for a claim (hold the lock): under
        the balanced policy on the schedule every producer plans every claim, so a row is always someone's."""
        owner = self._rows.owner[lo:hi]
        owner[owner == NO_OWNER] = w

    def owned_by(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows producer ``w`` owns (a mask), and the batches each row has completed (a copy)."""
        return self._rows.owner == w, self._rows.written.copy()

    def set_claim(self, b: int, key: int) -> None:
        self._rows.claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        self._rows.written[rows] = batches


def epoch_rows(cursors: np.ndarray, first: int, T: int, bounds: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """The shared row table an epoch starts from (owner, claim key, batches written, held cursor): rows with a
    stream (or dry) belong to the producer of their block, which reopens them; idle rows wait for a claim."""
    B = len(cursors)
    state = cursors[:, _cursor.STATE]
    owner = np.full(B, NO_OWNER, np.int64)
    for w, (lo, hi) in enumerate(bounds):
        owner[lo:hi] = w
    owner[state == RowPhase.IDLE] = NO_OWNER  # (a SHORT row pads until its claim: its block's producer keeps it)
    claim = first * T * B + np.arange(B, dtype=np.int64)
    claim[state == RowPhase.DRY] = NEVER
    return owner, claim, np.full(B, first, np.int64), cursors.copy()
