"""Streams of unknown length, read as the schedule plans the batch that holds them (``scheduled.claims.Probe``).

A stream whose length is not known has no planned end: the schedule asks its row's reader to read it into the
batch being planned, from its claim (or the batch's start) to the batch's end, and to look one step ahead. A
stream that ends there gives its true length, hence its row's next claim; one that goes on is read on in the next
batch. The steps land in the slot as they are read (the look-ahead step is held, not copied), so the filler
skips those runs (``OpenStreams.read``) and writes their flags from the plan like any other.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from streamcli.fills import checks
from streamcli.fills.flags import Views
from streamcli.fills.iterators import _END, Reader, Rows
from streamcli.scheduled.claims import OPEN


class OpenStreams:
    """The open streams of unknown length of one producer's rows; ``probe`` is the schedule's ``Probe`` for the
    batch whose slot ``v`` is."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.readers: dict[int, Reader] = {}
        self.held: dict[int, Any] = {}  # step sources: the looked-ahead step of a row, read and not yet copied
        self.read: set[tuple[int, int]] = set()  # (row, batch step) of the runs already written into ``v``
        self.v: Views | None = None

    def close(self) -> None:
        for r in self.readers.values():
            r.close()
        self.readers.clear()
        self.held.clear()
        self.read.clear()

    def probe(self, b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
        """Read row ``b``'s stream (``fresh``: a new one, ``item`` from ``pos``) into batch steps ``t0 ..
        t0 + n - 1``: the steps read if it ended there, else ``OPEN`` (a step after them exists)."""
        v, rows = self.v, self.rows
        assert v is not None
        r = self.readers.get(b)
        if fresh or r is None:  # a claim, or a resumed row that reopens its stream at ``pos``
            self.drop(b)
            r = self.readers[b] = rows._open(item, pos)
            if r.dead or not self._look(b, r):
                self.drop(b)
                return 0
        cols = [a[:, b] for a in v.data]
        if rows.blocks:
            got = rows._read_blocks(r, cols, t0, n)
        else:
            self._copy(r, cols, t0, self.held.pop(b))
            got = 1 + (rows._read_steps(r, cols, t0 + 1, n - 1) if n > 1 else 0)
        self.read.add((b, t0))
        rows.steps += got
        if got == n and not r.dead and self._look(b, r):
            return OPEN
        self.drop(b)
        return got

    def _look(self, b: int, r: Reader) -> bool:
        """Whether the stream has a step after those read (held for the next read)."""
        rows = self.rows
        if rows.blocks and r.blk is not None and r.j < len(r.blk[0]):
            return True
        got = rows._next(r)
        if got is _END or r.dead:
            return False
        if rows.blocks:
            where = functools.partial(rows.faults.where, r.item, r.pos, "block at step")
            r.blk, r.j = checks.block_arrays(got, rows.spec, rows.fields, where), 0
        else:
            self.held[b] = got
        return True

    def _copy(self, r: Reader, cols: list[np.ndarray], t: int, step: Any) -> None:
        """The checked copy of the held step into batch step ``t``."""
        for col, (name, shape, dtype) in zip(cols, self.rows.spec, strict=True):
            try:
                a = step[name]
            except (KeyError, TypeError, IndexError):
                a = None
            if type(a) is not np.ndarray or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                where = functools.partial(self.rows.faults.where, r.item, r.pos, "step")
                a = checks.step_field(step, name, shape, dtype, where)
            col[t] = a
        r.pos += 1

    def drop(self, b: int) -> None:
        """Forget row ``b``'s stream (it ended, or the row goes to another producer, ``fills.handover``, which reopens
        it where its cursor says)."""
        r = self.readers.pop(b, None)
        self.held.pop(b, None)
        if r is not None:
            r.close()
