"""What a filler writes into a slot besides the data: the flags of a batch plan, padding, and each row's cursor
and tickets taken.

Flags cost a few array operations per batch whatever B, plus a few per run that ends inside the batch. The cursors
and tickets taken come from the plan, corrected where a stream broke its promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.batch import FLAGS
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.schedule import BatchRuns, Run

# As plain ints: numpy compares an array with an ``IntEnum`` member several times slower than with an int.
_LIVE, _SHORT, _FOLLOW, _DRY = int(RowPhase.LIVE), int(RowPhase.SHORT), int(RowPhase.FOLLOW), int(RowPhase.DRY)


@dataclass
class Views:
    """One slot's arrays, time-major: the data fields in declared order, the flags, each row's tickets taken in the
    batch and its cursor after it."""

    data: list[np.ndarray]
    first: np.ndarray
    valid: np.ndarray
    stream: np.ndarray
    position: np.ndarray
    replayed: np.ndarray
    claims: np.ndarray
    cursor: np.ndarray
    writer: np.ndarray | None = None  # each row's producer, kept where rows move (``fills.balanced``)
    _rows: list[list[np.ndarray]] | None = field(default=None, init=False)  # ``row_columns``, made at its first call
    _steps: list[list[list[np.ndarray]]] | None = field(default=None, init=False)  # ``row_steps``, at its first call

    def row_columns(self) -> list[list[np.ndarray]]:
        """Each row's columns ``(T, ...)`` of the data fields, made once per slot: a filler reads them every batch."""
        if self._rows is None:
            self._rows = [[a[:, b] for a in self.data] for b in range(self.valid.shape[1])]
        return self._rows

    def row_steps(self) -> list[list[list[np.ndarray]]]:
        """Each row's step destinations, ``[row][field][t]``, made once per slot: a reader of steps copies each step
        into its view (a 0-d one for a scalar field) rather than indexing the column once a step."""
        if self._steps is None:
            self._steps = [[[col[t, ...] for t in range(len(col))] for col in cols] for cols in self.row_columns()]
        return self._steps

    def columns(self, lo: int, hi: int) -> Views:
        """Rows ``lo .. hi-1`` of the slot, numbered from 0 (views: writes land in the slot)."""
        if (lo, hi) == (0, self.valid.shape[1]):
            return self
        arrays = (self.first, self.valid, self.stream, self.position, self.replayed)
        rest = [a[:, lo:hi] for a in arrays] + [self.claims[lo:hi], self.cursor[lo:hi]]
        v = Views([a[:, lo:hi] for a in self.data], *rest)
        v.writer = None if self.writer is None else self.writer[lo:hi]
        return v

    @classmethod
    def of(cls, tb: dict[str, np.ndarray], names: list[str]) -> Views:
        """A slot's arrays by name (``shared.ring``): the data fields ``names``, the flags, tickets taken, cursors."""
        return cls([tb[n] for n in names], *(tb[n] for n in (*FLAGS, "claims", "cursor", "writer")))


def write_flags(v: Views, plan: BatchRuns, steps_t: np.ndarray, cols: list[int] | None = None) -> None:
    """The flags of a whole batch, or of its rows ``cols`` (the plan holds those only, ``BatchRuns.only``). Every
    row is written at once as if one stream covered it: a whole row's, or the stream of the run that ends the row's
    batch; then the runs that end earlier and the padding overwrite their cells, and the streams' first steps are set.
    """
    B, T = v.valid.shape[1], len(steps_t)
    whole = plan.whole
    if len(whole) == (B if cols is None else len(cols)):  # every row whole (``whole`` holds each row once, in order)
        at: slice | list[int] = slice(None) if cols is None else cols
        if cols and cols[-1] - cols[0] == len(cols) - 1:  # adjacent rows: a slice, not a gather
            at = slice(cols[0], cols[-1] + 1)
        write_whole(v, at, plan.item, plan.pos, plan.replay, steps_t)
        return
    item = np.full(B, -1, np.int64)
    pos = np.zeros(B, np.int64)
    rep = np.zeros(B, bool)
    item[whole], pos[whole], rep[whole] = plan.item, plan.pos, plan.replay
    inner: list[Run] = []  # runs that end before the batch does
    starts: tuple[list[int], list[int]] = ([], [])  # (step, row) of the streams' first steps
    for run in plan.runs:
        b, t0, n, it, p0, rp, fresh = run[:7]
        if t0 + n == T:  # its position at step t is t + p0 - t0 for the whole column; earlier cells are overwritten
            item[b], pos[b], rep[b] = it, p0 - t0, rp
        else:
            inner.append(run)
        if fresh:
            starts[0].append(t0)
            starts[1].append(b)
    if cols is None:
        write_whole(v, slice(None), item, pos, rep, steps_t)
    else:
        write_whole(v, cols, item[cols], pos[cols], rep[cols], steps_t)
    _write_runs(v, inner, steps_t)
    if starts[0]:
        v.first[starts] = True
    for b, t0, t1 in plan.pads:
        pad(v, b, t0, t1)


def write_whole(v: Views, cols: slice | list[int], item: Any, pos: Any, rep: Any, steps_t: np.ndarray) -> None:
    """The flags of rows ``cols``, each covered by one stream for the whole batch: ``item``, the position ``pos`` of
    its step 0 and whether it is replayed, per row (arrays or sequences); none is first (fresh rows set it after)."""
    v.valid[:, cols] = True
    v.first[:, cols] = False
    v.stream[:, cols] = item
    pos = np.asarray(pos, np.int64)
    if type(cols) is slice:
        np.add(steps_t[:, None], pos, out=v.position[:, cols])
    else:
        v.position[:, cols] = np.add.outer(steps_t, pos)
    v.replayed[:, cols] = rep


# Slices cost per run, gathered cells per step: runs are gathered into arrays only when there are more than
# _FEW_RUNS of them and they are short (on average at most _SHORT_RUN steps).
_FEW_RUNS, _SHORT_RUN = 8, 32


def _write_runs(v: Views, runs: list[Run], steps_t: np.ndarray) -> None:
    """The stream, position and replayed flags of ``runs``."""
    if len(runs) <= _FEW_RUNS or sum(r[2] for r in runs) > _SHORT_RUN * len(runs):
        for b, t0, n, it, p0, rp, *_ in runs:
            t1 = t0 + n
            v.stream[t0:t1, b] = it
            np.add(steps_t[:n], p0, out=v.position[t0:t1, b])
            v.replayed[t0:t1, b] = rp
        return
    # Many runs: every cell of every run at once, by fancy indexing.
    b, t0, n, it, p0, rp = np.array([r[:6] for r in runs], np.int64).T
    cell_run = np.repeat(np.arange(len(runs)), n)
    local = np.arange(len(cell_run)) - np.repeat(np.cumsum(n) - n, n)  # a cell's step within its run
    tt, bb = t0[cell_run] + local, b[cell_run]
    v.stream[tt, bb] = it[cell_run]
    v.position[tt, bb] = p0[cell_run] + local
    v.replayed[tt, bb] = rp[cell_run] != 0


def pad(v: Views, b: int, t0: int, t1: int) -> None:
    """Row ``b`` is padding from batch step ``t0`` to ``t1``: zeros, not valid, stream and position -1."""
    for a in v.data:
        a[t0:t1, b] = 0
    v.valid[t0:t1, b] = v.first[t0:t1, b] = v.replayed[t0:t1, b] = False
    v.stream[t0:t1, b] = v.position[t0:t1, b] = -1


def write_cursors(v: Views, plan: BatchRuns, short: Any = (), cols: list[int] | None = None) -> None:
    """Every row's tickets taken and cursor after the batch, or those of rows ``cols``; rows in ``short`` hold a
    stream that ended before its promise (their cursor says so)."""
    if cols is None:
        v.claims[...] = plan.claims
        v.cursor[...] = cursors_after(plan, short)
        return
    cur = plan.cursors[cols]  # (a copy: the plan is kept as planned)
    if short:
        cur[[i for i, b in enumerate(cols) if b in short and cur[i, _cursor.STATE] == _LIVE], _cursor.STATE] = _SHORT
    v.claims[cols], v.cursor[cols] = plan.claims[cols], cur


def cursors_after(plan: BatchRuns, short: Any = ()) -> np.ndarray:
    """Every row's cursor after batch ``plan`` (in process the plan's own array, not a copy); rows in ``short`` hold
    a stream that ended before its promise."""
    cur = plan.cursors
    if short:
        cur = cur.copy()  # the plan is kept as planned
        cur[[b for b in short if cur[b, _cursor.STATE] == _LIVE], _cursor.STATE] = _SHORT
    return cur


def any_dry(cursors: np.ndarray) -> bool:
    """Whether a row's claim found no stream: the tickets ran out ("drop" ends the epoch there)."""
    return bool((cursors[:, _cursor.STATE] == _DRY).any())


def _live(cursors: np.ndarray) -> np.ndarray:
    """Rows whose cursor holds a live original stream, not a replayed one (a row that follows an item's segments
    reads it on: live)."""
    state = cursors[:, _cursor.STATE]
    live: np.ndarray = ((state == _LIVE) | (state == _FOLLOW)) & (cursors[:, _cursor.FLAGS] & _cursor.REPLAYED == 0)
    return live


def live_rows(cursors: np.ndarray) -> int:
    """The rows holding a live original stream: counted only when asked."""
    return int(np.count_nonzero(_live(cursors)))
