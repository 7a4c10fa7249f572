"""The control block's rows: which producer owns each row, the key of its next possible claim and the batches it
has completed, and the rows given up mid-stream for an idle producer to go on with.
"""

from __future__ import annotations

import numpy as np

from streamcli.lives.control.layout import GIVEN, MOVED, NEVER, NO_OWNER, SMALL, Arrays, given_by


class RowOwners(Arrays):
    """Rows taken, released and given between producers, in canonical claim order (see ``Control``)."""

    def next_claim(self) -> tuple[int, int]:
        """(row, key) of the earliest undecided claim of all rows; the row may be owned or waiting."""
        b = int(np.argmin(self._claim))
        return b, int(self._claim[b])

    def next_waiting(self) -> tuple[int, int]:
        """(row, key) of the earliest claim of the rows waiting for one; key ``NEVER`` if none waits."""
        owner = self._owner
        if len(owner) <= SMALL and NO_OWNER not in owner.tolist():  # the usual case, 20 times faster
            return 0, NEVER
        keys = np.where(owner == NO_OWNER, self._claim, NEVER)
        b = int(np.argmin(keys))
        return b, int(keys[b])

    def waiting_below(self, key: int) -> list[tuple[int, int]]:
        """(key, row) of every row waiting for a claim at a key below ``key``, earliest first. Other producers
        may take or release rows meanwhile, so an entry can be stale by the time it is used (``take_row`` says)."""
        claim = self._claim.copy()  # one read: the two columns change under us
        rows = np.flatnonzero((self._owner == NO_OWNER) & (claim < key))
        return sorted(zip(claim[rows].tolist(), rows.tolist(), strict=True))

    def waiting(self, b: int) -> bool:
        return int(self._owner[b]) == NO_OWNER

    def take_row(self, b: int, w: int, key: int, planned: bool = False) -> np.ndarray | None:
        """Make producer ``w`` the owner of waiting row ``b`` if its claim at ``key`` is still the earliest of
        all, or with ``planned`` claims still due (hold the lock); returns the row's held cursor, or None if
        another producer was first."""
        if int(self._owner[b]) != NO_OWNER or int(self._claim[b]) != key:
            return None
        if not planned and int(self._claim.min()) != key:
            return None
        self._owner[b] = w
        held: np.ndarray = self._held[b].copy()
        return held

    def release_row(self, b: int, claim: int, written: int, cursor: tuple[int, int, int, int]) -> None:
        """Give row ``b`` up until its next claim at key ``claim`` (the owner calls this)."""
        self._held[b] = cursor
        self._written[b] = written
        self._claim[b] = claim
        self._owner[b] = NO_OWNER  # last: a producer that sees the row free sees its cursor and claim

    def give_row(self, b: int, w: int, cursor: tuple[int, int, int, int]) -> None:
        """Producer ``w`` gives live row ``b`` up mid-stream, at a batch boundary (its completed batches say which),
        for an idle producer to go on with (hold the lock). Its claim key stays as announced: the row takes no
        ticket, it only changes hands."""
        self._held[b] = cursor
        self._owner[b] = given_by(w)  # not NO_OWNER: the row is not waiting for a claim
        self._ctl[GIVEN] += 1
        self._ctl[MOVED] += 1

    @property
    def given(self) -> int:
        """Rows given up mid-stream that no producer has taken yet (a cheap check before ``take_given``)."""
        return int(self._ctl[GIVEN])

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return int(self._ctl[MOVED])

    def take_given(self, w: int, top: int, own: bool) -> tuple[int, np.ndarray] | None:
        """Make producer ``w`` the owner of the earliest row given up mid-stream whose next batch is below
        ``top`` (hold the lock): (row, its cursor), or None. Rows ``w`` gave up itself only if ``own``: a giver
        takes one back only when it has nothing else to do, never before the idle producer can."""
        owner = self._owner
        given = owner <= given_by(0)
        if not own:
            given &= owner != given_by(w)
        rows = np.flatnonzero(given & (self._written < top))
        if not len(rows):
            return None
        b = int(rows[np.argmin(self._written[rows])])
        self._owner[b] = w
        self._ctl[GIVEN] -= 1
        held: np.ndarray = self._held[b].copy()
        return b, held

    def written_of(self, b: int) -> int:
        return int(self._written[b])

    def set_claim(self, b: int, key: int) -> None:
        self._claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        self._written[rows] = batches
