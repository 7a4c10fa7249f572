"""A producer's facts: the fill spec every producer shares, the rows it owns and what each row is doing.

A producer is a worker process, or the main process when ``num_workers=0``. It owns the rows whose streams it
is reading (``Producer.rows``); a row's state is a plain ``Row``, and its cursor (``Row.cursor``) is all that
a resumed or moved row needs to go on (``rows_from``). What a producer does next is ``fills.claimed.produce``; how it
writes a row's steps is ``fills.claimed.write``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.fills.claimed.notes import Notes, SlotViews
from streamcli.fills.spec import FillSpec, Skip
from streamcli.fills.transformed import Transformer
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowState
from streamcli.shared.ring import Ring
from streamcli.source import Step, StreamSource, item_name

# The states as plain ints: ``Row.cursor`` runs for every row of every batch, where an enum member's lookup costs.
_IDLE, _LIVE, _DRY, _FOLLOW, _SHORT = (int(s) for s in RowState)

NO_END = 1 << 62  # ``Row.end`` of a stream that is not cut into segments


@dataclass
class Row:
    """What one batch row is doing. ``it``/``nxt`` are derived: resume reopens ``item`` at ``pos``."""

    b: int
    item: int = -1  # index into items(), -1 before the first claim
    pos: int = 0  # index within the stream of the next step to write
    q: int = 0  # the epoch position of the next step to write: batch ``q // T``, step ``q % T``
    replay: bool = False
    fresh: bool = False  # the next step written is the first of a claim
    done: bool = False  # a claim failed: no more streams this epoch
    it: Iterator[Step] | None = None
    nxt: Any = None  # the looked-ahead step
    reopen: bool = False  # resumed mid-stream: open ``item`` at ``pos`` before the next step
    end: int = NO_END  # the position at which the current stream (segment) ends
    follow: bool = False  # the segment ended, the item goes on: the next step starts its next segment
    expect: int = -1  # the position at which the item ends, if ``length()`` said so (checked, not trusted)
    blk: list[np.ndarray] | None = None  # block sources: the current block's arrays, in field order
    j: int = 0  # the next step's index in ``blk``
    open_ended: bool = False  # an item of unknown length cut into segments: they follow on this row
    short: bool = False  # the stream ended before its promise: padding until ``claim_q``
    skipped: bool = False  # the stream failed under on_error="skip" (reported as such, not as a length mismatch)
    claim_q: int = -1  # a short row's next claim: where its promise ends (``claim.pad_to_promise``)
    cost: float = 0.0  # seconds per step it has recently taken this producer (0: not measured yet)
    fine: bool = True  # its steps are slow enough to mark each one read (``write._copy``)
    tally: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # this batch's slot summary record (``ring``)

    @property
    def promised_stop(self) -> int:
        """Where the current stream's promise ends: its segment's end or its item's promised length, whichever
        comes first (``NO_END``: nothing promised)."""
        return min(self.end, self.expect) if self.expect >= 0 else NO_END

    def cursor(self) -> tuple[int, int, int, int]:
        if self.done:
            state = _DRY
        elif self.follow:
            state = _FOLLOW
        elif self.short:
            state = _SHORT
        else:
            state = _LIVE if (self.it is not None or self.reopen) else _IDLE
        return _cursor.record(self.item, self.pos, state, self.replay, self.open_ended)


@dataclass
class Producer:
    """One producer's context: a worker process, or the main process when num_workers=0."""

    fill_spec: FillSpec
    source: StreamSource
    items: Sequence[Any]
    ring: Ring
    w: int  # this producer's index in the control block
    lock: AbstractContextManager[Any]
    rows: dict[int, Row] = field(default_factory=dict)  # the rows this producer owns, by index
    gen: int = 0
    on_skip: Callable[[Skip], None] = lambda s: None
    parent_pid: int | None = None  # workers: exit if the parent is gone
    blocks: bool = False  # the source yields blocks of steps (``block_steps = True``)
    shared: bool = False  # other producers exist: publish claim keys as runs go (boundary "pack")
    steps: int = 0  # valid steps written, for the busy statistics
    idle: bool = False  # as published in the control block (``set_idle``)
    slots: dict[int, SlotViews] = field(default_factory=dict)
    out: Notes = field(default_factory=Notes)  # what the current piece of work wrote, for ``flush``
    last: tuple[int, SlotViews | None] = (-1, None)  # (batch, its SlotViews): the batch being written
    steps_t: np.ndarray = field(init=False)  # 0 .. T-1
    block: tuple[int, int] = (0, 0)  # the rows this producer reopens when its epoch starts
    setup: bool = False  # the epoch's rows are still to be read from the control block (``_set_up``)
    # The fill spec's numbers, read once: the per-run path reads them for every row of every batch.
    T: int = field(init=False)
    B: int = field(init=False)
    pack: bool = field(init=False)
    spec: list[tuple[str, tuple[int, ...], np.dtype[Any]]] = field(init=False)  # (name, shape, dtype) per field
    mark: np.ndarray = field(init=False)  # [stream, step] being read, in the control block (``Control.mark_of``)
    tf: Transformer | None = field(init=False)  # the loader's transform, wrapped round each stream it opens

    def __post_init__(self) -> None:
        self.T, self.B = self.fill_spec.time_steps, self.fill_spec.batch_size
        self.spec = [(f.name, f.shape, f.np_dtype) for f in self.fill_spec.fields]
        self.pack = self.fill_spec.boundary == "pack"
        self.steps_t = np.arange(self.T, dtype=np.int64)
        self.mark = self.ring.control.mark_of(self.w)
        self.tf = Transformer.of(self.fill_spec, self.ring.control, lambda i: item_name(self.source, self.items[i]))


def rows_from(cursors: np.ndarray, lo: int, segment: int, q: int) -> list[Row]:
    """Rows ``lo, lo+1, ...`` as the cursor records say, at epoch position ``q``; live ones reopen lazily.

    Segments start at multiples of ``segment`` in their item, so a live row at ``pos`` ends its segment at the
    next multiple (it has written at least one step of it, hence the ``pos - 1``)."""
    rows = []
    for i, (item, pos, state, flags) in enumerate(cursors.tolist()):
        row = Row(lo + i, item=item, pos=pos, q=q, replay=bool(flags & _cursor.REPLAYED))
        row.open_ended = bool(flags & _cursor.OPEN_ENDED)
        row.done = state == RowState.DRY
        row.reopen = state in (RowState.LIVE, RowState.FOLLOW)
        row.follow = state == RowState.FOLLOW
        row.short = state == RowState.SHORT
        if segment and state in (RowState.LIVE, RowState.SHORT):
            row.end = ((pos - 1) // segment + 1) * segment
        rows.append(row)
    return rows
