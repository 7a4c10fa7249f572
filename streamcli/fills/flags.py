"""What a filler writes into a slot besides the data: the flags of a batch plan (``is_first`` and ``valid`` with
every batch, the others in process only when first read), padding, and each row's cursor and tickets taken."""

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
Pad = tuple[int, int, int]  # (row, first step, end) of padding


@dataclass
class Views:
    """One slot's arrays, time-major: the data fields, the flags, each row's tickets taken and cursor after it."""

    data: list[np.ndarray]
    first: np.ndarray
    valid: np.ndarray
    stream: np.ndarray
    position: np.ndarray
    replayed: np.ndarray
    claims: np.ndarray
    cursor: np.ndarray
    writer: np.ndarray | None = None  # each row's producer, kept where rows move (``fills.balanced``)
    padded: list[Pad] | None = field(default=None, init=False)  # the fill's padding, for ``Unread`` (None: written)
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
    """Every flag of a whole batch, or of its rows ``cols`` (the plan holds those only, ``BatchRuns.only``)."""
    write_marks(v, plan, cols)
    write_ids(v, plan, steps_t, cols)


def _columns(cols: list[int] | None) -> slice | list[int]:
    if cols and cols[-1] - cols[0] == len(cols) - 1:  # adjacent rows: a slice, not a gather
        return slice(cols[0], cols[-1] + 1)
    return slice(None) if cols is None else cols


def write_marks(v: Views, plan: BatchRuns, cols: list[int] | None = None) -> None:
    """``is_first`` and ``valid`` of the rows the plan names, and zeros on its padding."""
    at = _columns(cols)
    v.valid[:, at] = True
    v.first[:, at] = False
    for run in plan.runs:  # (a few a batch: cheaper one by one than gathered)
        if run[6]:
            v.first[run[1], run[0]] = True
    for b, t0, t1 in plan.pads:
        _pad_marks(v, b, t0, t1)


def write_ids(v: Views, plan: BatchRuns, steps_t: np.ndarray, cols: list[int] | None = None, padded: Any = ()) -> None:
    """``stream``, ``position`` and ``replayed`` of the rows the plan names: every row as if one stream covered it (a
    whole row's, or that of the run ending its batch), then the runs that end earlier, its padding and ``padded``."""
    B, T, at, whole = v.valid.shape[1], len(steps_t), _columns(cols), plan.whole
    if len(whole) == (B if cols is None else len(cols)):  # every row whole (``whole`` holds each row once, in order)
        _write_whole(v, at, plan.item, plan.pos, plan.replay, steps_t)
    else:
        item, pos, rep = np.full(B, -1, np.int64), np.zeros(B, np.int64), np.zeros(B, bool)
        item[whole], pos[whole], rep[whole] = plan.item, plan.pos, plan.replay
        inner: list[Run] = []  # runs that end before the batch does
        for run in plan.runs:
            b, t0, n, it, p0, rp = run[:6]
            if t0 + n == T:  # its position at step t is t + p0 - t0 for the whole column; earlier cells overwritten
                item[b], pos[b], rep[b] = it, p0 - t0, rp
            else:
                inner.append(run)
        if cols is not None:
            item, pos, rep = item[cols], pos[cols], rep[cols]
        _write_whole(v, at, item, pos, rep, steps_t)
        _write_runs(v, inner, steps_t)
    for b, t0, t1 in (*plan.pads, *padded):
        _pad_ids(v, b, t0, t1)


class Unread:
    """``write_ids`` of a batch filled in process, run when its consumer first reads one of them (``batch.Deferred``;
    most training loops read ``is_first`` and ``valid`` only): its slot is lent to it until its last view dies."""

    def __init__(self, v: Views, plan: BatchRuns, steps_t: np.ndarray, padded: list[Pad]) -> None:
        self.v, self.steps_t, self.padded = v, steps_t, padded
        self.plan: BatchRuns | None = plan  # None once written

    def __call__(self) -> None:
        plan, self.plan = self.plan, None
        if plan is not None:
            write_ids(self.v, plan, self.steps_t, padded=self.padded)


def _write_whole(v: Views, cols: slice | list[int], item: Any, pos: Any, rep: Any, steps_t: np.ndarray) -> None:
    """Rows ``cols``, each one stream's for the whole batch: ``item``, the position ``pos`` of its step 0, replayed."""
    v.stream[:, cols] = item
    pos = np.asarray(pos, np.int64)
    if type(cols) is slice:
        np.add(steps_t[:, None], pos, out=v.position[:, cols])
    else:
        v.position[:, cols] = np.add.outer(steps_t, pos)
    v.replayed[:, cols] = rep


# Slices cost per run, gathered cells per step: runs are gathered only when many (> _FEW_RUNS) and short.
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
    _pad_marks(v, b, t0, t1)
    if v.padded is None:
        _pad_ids(v, b, t0, t1)
    else:
        v.padded.append((b, t0, t1))


def _pad_marks(v: Views, b: int, t0: int, t1: int) -> None:
    for a in v.data:
        a[t0:t1, b] = 0
    v.valid[t0:t1, b] = v.first[t0:t1, b] = False


def _pad_ids(v: Views, b: int, t0: int, t1: int) -> None:
    v.replayed[t0:t1, b] = False
    v.stream[t0:t1, b] = v.position[t0:t1, b] = -1


def write_cursors(v: Views, plan: BatchRuns, short: Any = (), cols: list[int] | None = None) -> None:
    """Every row's (or rows ``cols``') tickets taken and cursor after the batch (``short``: see ``cursors_after``)."""
    at = slice(None) if cols is None else cols
    v.claims[at], v.cursor[at] = plan.claims[at], cursors_after(plan, short)[at]


def cursors_after(plan: BatchRuns, short: Any = ()) -> np.ndarray:
    """Every row's cursor after batch ``plan`` (the plan's own array unless a row in ``short`` broke its promise)."""
    cur = plan.cursors
    if short:
        cur = cur.copy()  # the plan is kept as planned
        cur[[b for b in short if cur[b, _cursor.STATE] == _LIVE], _cursor.STATE] = _SHORT
    return cur


def any_dry(cursors: np.ndarray) -> bool:
    """Whether a row's claim found no stream: the tickets ran out ("drop" ends the epoch there)."""
    return bool((cursors[:, _cursor.STATE] == _DRY).any())


def live_rows(cursors: np.ndarray) -> int:
    """The rows whose cursor holds a live original, not replayed, stream (following an item's segments: live)."""
    state = cursors[:, _cursor.STATE]
    return int(
        np.count_nonzero(((state == _LIVE) | (state == _FOLLOW)) & (cursors[:, _cursor.FLAGS] & _cursor.REPLAYED == 0))
    )
