"""How a producer's work lands in a slot: the data straight away, everything else noted and written at once.

A producer copies each step's (or block's) data into the slot as it reads it. The per-step flags, each row's
cursor and counts, and the rows' completion are noted (``Notes``) and written at the end of a piece of work by
``flush``: the flags of all its runs in a few vectorised writes rather than one small write per step, and the
completion last, because the loader and the other producers read a row only once it is counted done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.fills.flags import Views, pad_flags, write_run, write_whole
from streamcli.scheduled import cursor as _cursor
from streamcli.shared.control import Control
from streamcli.shared.ring import SUMMARY

_RECORD = 1 + _cursor.WIDTH + SUMMARY  # a row's entry in ``Notes.records``
# Writing a step into its own view, made once per slot (``cells[t][...] = step``), costs less than indexing the
# row's column (``column[t] = step``) for small steps, but each view takes memory: only slots of up to this many
# (field, step, row) cells keep them (the figures: ``benchmarks/HISTORY.md``, "Figures that code comments gave").
_CELLS = 2048


def _steps(column: np.ndarray) -> list[np.ndarray]:
    return [column[t, ...] for t in range(len(column))]  # (``...``: a view even where a step is a scalar)


def _same(column: np.ndarray) -> np.ndarray:
    return column


@dataclass
class SlotViews:
    """One slot's arrays as a producer writes them (``views``: time-major, fields in declared order), and each
    row's columns of the data fields."""

    views: Views
    columns: list[list[tuple[str, tuple[int, ...], np.dtype[Any], Any]]]  # per row: (name, shape, dtype, where)
    cells: bool  # ``where`` is a list of the steps' views (write ``where[t][...] = a``), else the row's column
    rows: list[list[np.ndarray]]  # per row, each field's column: ``(T, *shape)``

    @classmethod
    def of(cls, views: dict[str, np.ndarray], spec: Sequence[tuple[str, tuple[int, ...], np.dtype[Any]]]) -> SlotViews:
        """The views of one slot; ``spec`` is (name, shape, dtype) per data field (``Producer.spec``)."""
        v = Views.of(views, [name for name, _, _ in spec])
        T, B = v.valid.shape
        cells = T * B * len(v.data) <= _CELLS
        where = _steps if cells else _same
        rows = [[a[:, b] for a in v.data] for b in range(B)]
        columns = [
            [(name, shape, dtype, where(col)) for (name, shape, dtype), col in zip(spec, row, strict=True)]
            for row in rows
        ]
        return cls(views=v, columns=columns, cells=cells, rows=rows)


@dataclass
class Notes:
    """What one piece of work wrote into one slot besides the data, applied at its end by ``flush``."""

    runs: list[tuple[int, int, int, int, int, int, int]] = field(default_factory=list)  # b t0 n item pos rep fresh
    pads: list[tuple[int, int, int]] = field(default_factory=list)  # (row, first padded step, end)
    records: list[int] = field(default_factory=list)  # per row, flat: the row, its cursor, its counts (``record``)
    written: list[int] = field(default_factory=list)  # rows whose batch is complete
    releases: list[tuple[int, int, int, tuple[int, int, int, int]]] = field(default_factory=list)


def record(notes: Notes, b: int, cursor: tuple[int, ...], counts: Sequence[int]) -> None:
    """Note row ``b``'s cursor and counts for the slot; one flat list, so ``flush`` converts it in one call."""
    rec = notes.records
    rec.append(b)
    rec.extend(cursor)
    rec.extend(counts)


def pad(sv: SlotViews, b: int, t: int, notes: Notes, t_end: int | None = None) -> None:
    """Padding from batch step ``t`` to ``t_end`` (the end) of row ``b``: zeros, not valid, stream and position
    -1."""
    v = sv.views
    for arr in v.data:
        arr[t:t_end, b] = 0
    notes.pads.append((b, t, len(v.first) if t_end is None else t_end))


def flush(notes: Notes, sv: SlotViews, control: Control, k: int, steps_t: np.ndarray) -> None:
    """Apply what a piece of work noted for batch ``k``; ``steps_t`` is ``0 .. T-1``."""
    v = sv.views
    T = len(steps_t)
    if notes.runs:
        whole = [r for r in notes.runs if r[2] == T]  # the common case: a row's stream fills the batch
        if whole:
            b, _, _, item, pos0, rep, fresh = zip(*whole, strict=True)
            write_whole(v, _columns(b), item, pos0, rep, steps_t)
            if any(fresh):
                v.first[0, [c for c, f in zip(b, fresh, strict=True) if f]] = True
        for b0, t0, n, item0, p0, rep0, fresh0 in notes.runs if len(whole) < len(notes.runs) else ():
            if n != T:
                write_run(v, b0, t0, n, item0, p0, rep0, fresh0, steps_t)
        notes.runs.clear()
    for b0, t0, t1 in notes.pads:
        pad_flags(v, b0, t0, t1)
    notes.pads.clear()
    if notes.records:
        bs = _columns(notes.records[::_RECORD])
        recs = np.array(notes.records, np.int64).reshape(-1, _RECORD)
        v.cursor[bs] = recs[:, 1 : 1 + _cursor.WIDTH]
        v.summary[bs] = recs[:, 1 + _cursor.WIDTH :]
        notes.records.clear()
    if notes.written:
        control.set_written(_columns(notes.written), k + 1)
        notes.written.clear()
    for release in notes.releases:
        control.release_row(*release)
    notes.releases.clear()


def _columns(rows: Sequence[int]) -> slice | list[int]:
    """Row indices as a slice when they are consecutive (the usual case): cheaper to write through."""
    rows = list(rows)
    lo, hi = rows[0], rows[-1] + 1
    return slice(lo, hi) if hi - lo == len(rows) and rows == list(range(lo, hi)) else rows
