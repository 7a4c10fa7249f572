"""The reader of iterator sources: one open iterator per row, each step checked where it is copied, and a look-ahead
where a stream's length is open.

Step and block sources (``open(item, start)``) are read in order, so a row's stream lives in one process: a
producer fills its own rows of every batch, copying blocks by slices (a block may cross a batch's end) or steps one
by one. A row opens its stream where the plan says it starts, or reopens it where a resumed or moved row goes on
(``open(item, start=pos)``): nothing is replayed. A stream that ends before its promise, or fails under
``on_error="skip"``, leaves its row padding until its planned next claim; one that goes on past it is cut there,
and either is reported.

A stream whose length is not known has no planned end: the schedule asks its row's reader to read it into the
batch being planned (``probe``, the schedule's ``Probe``) and to look one step ahead. A stream that ends there
gives its true length, hence its row's next claim; one that goes on is read on in the next batch. The steps land
in the slot as they are read (the look-ahead step is held in the reader, copied by the next read), so the fill
skips those runs (``read``) and writes their flags from the plan like any other.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.fills import checks
from streamcli.fills.faults import SOURCE_ERRORS, Faults
from streamcli.fills.flags import Views, pad
from streamcli.fills.transformed import Transformer
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.schedule import BatchRuns, Run
from streamcli.shared.control.layout import OPENING, READING
from streamcli.source import Field, StreamSource, close_stream

if TYPE_CHECKING:
    from streamcli.trace import Tracer

_END = object()  # a stream's end (``next(it, _END)``), and a reader holding no step read ahead


@dataclass(slots=True)
class Reader:
    """One row's open stream: the item, the next position it yields, the current block (block sources) or the
    step read ahead (step sources whose length is open)."""

    item: int
    pos: int
    it: Iterator[Any] | None
    blk: list[np.ndarray] | None = None
    j: int = 0
    dead: bool = False  # ended or failed before its promise: its row pads until the stream's planned end
    ahead: Any = _END

    def close(self) -> None:
        it, self.it, self.blk, self.ahead = self.it, None, None, _END
        close_stream(it)


class Rows:
    """The open streams of one producer's rows, and how it reads them into a slot."""

    def __init__(
        self,
        source: StreamSource,
        fields: Sequence[Field],
        blocks: bool,
        faults: Faults,
        mark: np.ndarray,
        tf: Transformer | None = None,
    ) -> None:
        self.source, self.fields, self.blocks, self.faults, self.mark = source, tuple(fields), blocks, faults, mark
        self.tf = tf  # the loader's transform: each stream is wrapped where it opens; ``fields`` are its output
        self.spec = [(f.name, f.shape, f.np_dtype) for f in fields]
        self.beat = mark.data  # ``mark`` as a memoryview: it stores an int quicker
        # Workers mark each step read (a worker's death and a stall name it); in process nothing reads it per step.
        self.steps_marked = True
        self.readers: dict[int, Reader] = {}
        self.read: set[tuple[int, int]] = set()  # (row, batch step) of the runs ``probe`` wrote into ``v``
        self.v: Views | None = None  # the slot of the batch being planned, which ``probe`` writes into
        self.steps = 0  # valid steps read, for the busy statistics
        self.tracer: Tracer | None = None  # ``streamcli.trace``: reads and opens timed, when set

    def close(self) -> None:
        for r in self.readers.values():
            r.close()
        self.readers.clear()
        self.read.clear()

    def drop(self, b: int) -> None:
        """Forget row ``b``'s stream: it ended, or the row goes to another producer (``fills.balanced``), which
        reopens it where the plan or its cursor says."""
        r = self.readers.pop(b, None)
        if r is not None:
            r.close()

    def fill(self, v: Views, plan: BatchRuns, read: set[tuple[int, int]] | None = None) -> set[int]:
        """Write every row of batch ``plan.k`` (flags are written before, from the plan) but the runs ``read``
        while it was planned, (row, first step) each; a row that only pads closes its stream. Returns the rows
        that end the batch holding a stream that ran out before its promise."""
        if self.tracer is not None:
            t0 = time.perf_counter()
            short = self._fill(v, plan, read)
            self.tracer.read(plan.k, t0, time.perf_counter(), len(plan.whole) + len(plan.runs))
            return short
        return self._fill(v, plan, read)

    def _fill(self, v: Views, plan: BatchRuns, read: set[tuple[int, int]] | None) -> set[int]:
        T = len(v.valid)
        short: set[int] = set()
        whole = plan.whole
        data, readers, blocks = v.data, self.readers, self.blocks
        one = data[0] if len(data) == 1 else None  # the common source of one field: no loop over fields
        steps = 0
        for b, item, p, stop, expect, seg_end in zip(
            whole.tolist(),
            plan.item.tolist(),
            plan.pos.tolist(),
            plan.stop.tolist(),
            plan.expect.tolist(),
            plan.seg_end.tolist(),
            strict=True,
        ):
            if read and (b, 0) in read:
                continue
            r = readers.get(b)
            # The usual whole row: its stream goes on past the batch and its current block holds all T steps.
            if blocks and r is not None and (blk := r.blk) is not None and r.pos == p and r.item == item:
                j = r.j
                if j + T <= len(blk[0]) and p + T < stop and not r.dead:
                    if one is not None:
                        one[:, b] = blk[0][j : j + T]
                    else:
                        for dst, src in zip(data, blk, strict=True):
                            dst[:, b] = src[j : j + T]
                    r.j, r.pos = j + T, p + T
                    steps += T
                    continue
            # The usual whole row: its open stream goes on past the batch (a block source's next block included).
            if r is not None and r.pos == p and r.item == item and p + T < stop and not r.dead:
                got = self._read(v, b, r, 0, T, expect)
                if got < T:
                    pad(v, b, got, T)
                    short.add(b)
                r.pos = p + T
                steps += got
                continue
            if self._run(v, (b, 0, T, item, p, False, False, stop, expect, seg_end), T):
                short.add(b)
        for run in plan.runs:
            b, t0, n, item, p, _, fresh, stop, expect, seg_end = run
            if read and (b, t0) in read:
                continue
            r = readers.get(b)
            # The usual run of a block source: the row's open stream goes on in its current block.
            if (
                blocks
                and r is not None
                and not fresh
                and (blk := r.blk) is not None
                and r.pos == p
                and r.item == item
                and r.j + n <= len(blk[0])
                and not r.dead
            ):
                j = r.j
                t1 = t0 + n
                if one is not None:
                    one[t0:t1, b] = blk[0][j : j + n]
                else:
                    for dst, src in zip(data, blk, strict=True):
                        dst[t0:t1, b] = src[j : j + n]
                r.j, r.pos = j + n, p + n
                steps += n
                if p + n == stop:
                    self._end(r, b, stop, expect, seg_end)
                continue
            if self._run(v, run, T):
                short.add(b)
        self.steps += steps
        for b, _, t1 in plan.pads:  # a row that only pads holds no open stream
            if t1 == T:
                r = self.readers.pop(b, None)
                if r is not None:
                    r.close()
        return short

    def _run(self, v: Views, run: Run, T: int) -> bool:
        """One run's steps; True if it ends the batch holding a stream that ran out before its promise."""
        b, t0, n, item, p, _, fresh, stop, expect, seg_end = run
        r = self.readers.get(b)
        if r is None or fresh or r.item != item or r.pos != p:
            if r is not None:
                r.close()
            r = self.readers[b] = self._open(item, p)
        got = 0 if r.dead else self._read(v, b, r, t0, n, expect)
        if got < n:
            pad(v, b, t0 + got, t0 + n)
        r.pos = p + n
        self.steps += got
        if p + n == stop:
            self._end(r, b, stop, expect, seg_end)
            return False
        return r.dead and t0 + n == T

    def _end(self, r: Reader, b: int, stop: int, expect: int, seg_end: int) -> None:
        """Row ``b``'s stream is over as planned: report it if it goes on past its promise, and close it."""
        if not r.dead and stop == expect != seg_end and self._look_ahead(r):
            self.faults.mismatch(r.item, stop, expect, "goes on past them")
        r.close()
        del self.readers[b]

    def _open(self, item: int, pos: int) -> Reader:
        """Stream ``item`` from step ``pos``, transformed; a dead reader if it failed to open under on_error="skip"
        (reported as skipped; under "raise" the failure raises ``SourceError``)."""
        t0 = time.perf_counter() if self.tracer is not None else 0.0
        faults = self.faults
        self.mark[0], self.mark[1], self.mark[2] = item, pos, OPENING  # a death or a stall here names this stream
        faults.check_data(item)
        try:
            it: Iterator[Any] | None = iter(self.source.open(faults.items[item], pos))
        except SOURCE_ERRORS as exc:
            faults.fail(item, pos, exc, "opening")
            it = None
        if it is not None and self.tf is not None:
            it = self.tf.wrap(it, item, pos, self.blocks)
        if self.tracer is not None:
            self.tracer.complete("open", t0, time.perf_counter(), {"item": item, "position": pos})
        return Reader(item, pos, it, dead=it is None)

    def _next(self, r: Reader) -> Any:
        """The stream's next step or block, ``_END``, or ``_END`` with the reader dead after a skipped failure."""
        assert r.it is not None
        self.mark[0], self.mark[1], self.mark[2] = r.item, r.pos, READING
        try:
            return next(r.it, _END)
        except SOURCE_ERRORS as exc:
            self.faults.fail(r.item, r.pos, exc, "reading")
            r.dead = True
            return _END

    def _look_ahead(self, r: Reader) -> bool:
        """Whether the stream has a step after those read; the block or step read to know is kept, for the next
        read."""
        if r.it is None or r.ahead is not _END:
            return r.it is not None
        if self.blocks and r.blk is not None and r.j < len(r.blk[0]):
            return True
        got = self._next(r)
        if got is _END or r.dead:
            return False
        if self.blocks:
            where = functools.partial(self.faults.where, r.item, r.pos, "block at step")
            r.blk, r.j = checks.block_arrays(got, self.spec, self.fields, where), 0
        else:
            r.ahead = got
        return True

    def probe(self, b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
        """Read row ``b``'s stream of unknown length (``fresh``: a new one, ``item`` from ``pos``) into steps
        ``t0 .. t0 + n - 1`` of the slot ``v``: the steps read if it ended there, else ``OPEN`` (a step after them
        exists). The schedule's ``Probe``."""
        v = self.v
        assert v is not None
        r = self.readers.get(b)
        if fresh or r is None:  # a claim, or a resumed row that reopens its stream at ``pos``
            self.drop(b)
            r = self.readers[b] = self._open(item, pos)
            if r.dead or not self._look_ahead(r):
                self.drop(b)
                return 0
        if self.blocks:
            got = self._read_blocks(r, v.row_columns()[b], t0, n)
        else:
            got = self._read_steps(r, v.row_steps()[b], t0, n)
        self.read.add((b, t0))
        self.steps += got
        if got == n and not r.dead and self._look_ahead(r):
            return OPEN
        self.drop(b)
        return got

    def _read(self, v: Views, b: int, r: Reader, t0: int, n: int, expect: int) -> int:
        """Copy up to ``n`` steps of the row's stream into steps ``t0 ..`` of row ``b`` of ``v``; returns the steps
        copied."""
        if self.blocks:
            got = self._read_blocks(r, v.row_columns()[b], t0, n)
        else:
            got = self._read_steps(r, v.row_steps()[b], t0, n)
        if got < n and not r.dead:  # ended before its promise
            r.dead = True
            self.faults.mismatch(r.item, r.pos, expect, f"ended after {r.pos} steps")
        return got

    def _read_blocks(self, r: Reader, cols: list[np.ndarray], t0: int, n: int) -> int:
        got = 0
        while got < n:
            if r.blk is None or r.j >= len(r.blk[0]):
                block = self._next(r)
                if block is _END:
                    break
                r.blk = checks.block_arrays(
                    block, self.spec, self.fields, functools.partial(self.faults.where, r.item, r.pos, "block at step")
                )
                r.j = 0
            blk, j = r.blk, r.j
            m = min(n - got, len(blk[0]) - j)
            t = t0 + got
            for col, src in zip(cols, blk, strict=True):
                col[t : t + m] = src[j : j + m]
            r.j = j + m
            got += m
            r.pos += m
        return got

    def _read_steps(self, r: Reader, steps: list[list[np.ndarray]], t0: int, n: int) -> int:
        """One ``next()`` and one checked copy per step into its destination (``steps``: the row's, per field, per
        batch step): the loop a hand-written reader would run. Returns the steps copied."""
        it, mark = r.it, self.beat
        assert it is not None
        if r.ahead is not _END:  # the step read ahead where the length is open comes first
            it, r.ahead = itertools.chain((r.ahead,), it), _END
        off = r.pos - t0  # the stream's position of batch step t: off + t
        mark[0], mark[1], mark[2] = r.item, r.pos, READING  # the stream read: a death or ``worker_stream`` names it
        marked = self.steps_marked
        t = t0
        if len(steps) == 1:  # the common source of one field: no loop over fields
            ((name, shape, dtype),) = self.spec
            for dst in steps[0][t0 : t0 + n]:
                if marked:
                    mark[1] = off + t  # the step about to be read: a death or a stall names it
                try:
                    step: Any = next(it, _END)
                except SOURCE_ERRORS as exc:
                    return self._failed(r, off, t, t0, exc)
                if step is _END:
                    break
                try:
                    a = step[name]
                except (KeyError, TypeError, IndexError):
                    a = None
                # dtype by identity first: a builtin dtype is one object; an equal other one is checked again below
                if type(a) is not np.ndarray or a.dtype is not dtype or a.shape != shape:
                    a = checks.step_field(
                        step, name, shape, dtype, functools.partial(self.faults.where, r.item, off + t, "step")
                    )
                dst[...] = a
                t += 1
            r.pos = off + t
            return t - t0
        spec = self.spec
        for dsts in zip(*(col[t0 : t0 + n] for col in steps), strict=True):
            if marked:
                mark[1] = off + t
            try:
                step = next(it, _END)
            except SOURCE_ERRORS as exc:
                return self._failed(r, off, t, t0, exc)
            if step is _END:
                break
            for dst, (name, shape, dtype) in zip(dsts, spec, strict=True):
                try:
                    a = step[name]
                except (KeyError, TypeError, IndexError):
                    a = None
                if type(a) is not np.ndarray or a.dtype is not dtype or a.shape != shape:
                    a = checks.step_field(
                        step, name, shape, dtype, functools.partial(self.faults.where, r.item, off + t, "step")
                    )
                dst[...] = a
            t += 1
        r.pos = off + t
        return t - t0

    def _failed(self, r: Reader, off: int, t: int, t0: int, exc: BaseException) -> int:
        """Step ``off + t`` failed to read: report it (under on_error="raise" this raises), and the row is dead from
        there. Returns the steps copied before it."""
        r.pos = off + t
        self.faults.fail(r.item, r.pos, exc, "reading")
        r.dead = True
        return t - t0
