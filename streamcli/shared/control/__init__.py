"""The ring's control block: the shared state through which the loader and the producers coordinate, and the
only code that knows its layout (``Control``; the loader and the producers call its methods, never index it).

Its arrays, and the views that name their values and columns, are in ``layout`` (a named int64 is ``values``'s
``Int64``); ``Control`` puts each concern behind a class of its own: ``tables`` (the epoch's set-up, the
generation and the hand-out counter), ``rows`` (who owns a row and its next claim), ``moves`` (a row handed to
an idle producer), ``completion`` (when a batch is whole) and ``reports`` (the producers' counters and marks).
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.completion import Completion
from streamcli.shared.control.layout import NEVER, NO_OWNER, ControlValues, RowTable, WorkerStats, arrays
from streamcli.shared.control.moves import Moves
from streamcli.shared.control.reports import Reports
from streamcli.shared.control.rows import RowOwners
from streamcli.shared.control.tables import EpochTables

__all__ = ["CLOSING", "NEVER", "NO_OWNER", "Aborted", "Control", "arrays"]

CLOSING = -2  # the generation that tells workers to read their pipe for "quit" (or to stop starting)


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current work."""


class Control(EpochTables, RowOwners, Moves, Completion, Reports):
    """The control block's arrays behind methods: the loader and the producers call these, never index it.

    Tickets stay in canonical order through one rule: where producers plan rows whose lengths are not all known,
    a claim at key K is made only when K is the smallest ``claim`` of all rows, i.e. when every row has decided
    (by reading ahead) that it takes no ticket before K (``fills.turns``). With every length known each row's key
    and tickets follow from the lengths (``scheduled.claims``), and every producer replays them without the
    table. Under the balanced policy a row changes hands at a batch boundary (``rows``, ``moves``). Values in
    ``claim`` and ``written`` only grow within an epoch, and each row has one writer at a time (its owner,
    changed only under the lock), so readers need no lock: a stale read only makes them wait longer.
    """

    def __init__(
        self,
        ctl: np.ndarray,
        slot_of: np.ndarray,
        rows: np.ndarray,
        held: np.ndarray,
        wstat: np.ndarray,
        order: np.ndarray,
        start: np.ndarray,
        mark: np.ndarray,
        done: np.ndarray,
        wdone: np.ndarray,
    ):
        self._ctl, self._rows, self._wstat = ControlValues(ctl), RowTable(rows), WorkerStats(wstat)
        self._slot_of, self._held, self._order, self._start, self._mark = slot_of, held, order, start, mark
        self._done, self._wdone = done, wdone
        # What ``clear`` zeroes: every array but ``wdone``, which ``set_rows`` sets with ``done``.
        self._cleared: tuple[np.ndarray, ...] = (ctl, slot_of, rows, held, wstat, order, start, mark, done)

    def clear(self) -> None:
        for a in self._cleared:
            a[...] = 0
        self._wstat.stream[:] = -1  # nothing read yet
        self._mark[:, 0] = -1
        self._ctl.ready = -1
        self._ctl.awaited = -1
        self.reset_moves()

    def release(self) -> None:
        """Drop the views (the segment is about to be unmapped)."""
        empty = np.zeros(0)
        self._ctl = ControlValues(np.zeros(ControlValues.SIZE, np.int64))
        self._rows = RowTable(np.zeros((0, RowTable.WIDTH), np.int64))
        self._wstat = WorkerStats(np.zeros((0, WorkerStats.WIDTH)))
        self._slot_of = self._held = self._order = self._start = self._mark = self._done = self._wdone = empty
        self._cleared = ()
