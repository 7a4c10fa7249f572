"""The reader of iterator sources (``open(item, start)``): one open iterator per row, each step checked as it is
copied into the slot, and where a stream's length is open, a look-ahead and claims by turns.

A row opens its stream where the plan starts it, or reopens it where a resumed or moved row goes on: nothing is
replayed. A stream that ends before its promise, or fails under ``on_error="skip"``, pads its row until its planned
end; one that goes on past it is cut there; either is reported. A stream of unknown length is read as its batch is
planned (``Rows.probe``), one step looked ahead to find its end; the fill skips the runs read so (``read``). Where
producers each read their own such rows, claims wait their turn across them (``ProducerTurns``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.fills.flags import Views, pad
from streamcli.fills.spec import SOURCE_ERRORS, Faults, block_arrays, step_field
from streamcli.fills.transformed import Transformer
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.plans import BatchRuns, Run
from streamcli.shared.control import NEVER, OPENING, READING, Aborted, Control
from streamcli.source import Field, StreamSource, close_stream

if TYPE_CHECKING:
    from streamcli.trace import Tracer

_END = object()  # a stream's end (``next(it, _END)``), and a reader holding no step read ahead
_NAP_S = 1e-4  # the longest nap of a producer waiting for its turn: how late it sees that its turn has come


@dataclass(slots=True)
class Reader:
    """One row's open stream: its item, next position, the block being read or the step read ahead."""

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
    """The open streams of one producer's rows, and how they are read into a slot."""

    def __init__(
        self,
        source: StreamSource,
        fields: Sequence[Field],
        blocks: bool,
        faults: Faults,
        mark: np.ndarray,
        tf: Transformer | None = None,
    ) -> None:
        self.source, self.blocks, self.faults, self.mark, self.tf = source, blocks, faults, mark, tf
        self.spec = [(f.name, f.shape, f.np_dtype) for f in fields]  # ``tf``'s output fields, where it is set
        self.beat = mark.data  # ``mark`` as a memoryview: it stores an int quicker
        self.steps_marked = True  # workers name each step read (a death or a stall names it); in process, each run
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
        """Forget row ``b``'s stream: it ended, or the row goes to another producer, which reopens it."""
        r = self.readers.pop(b, None)
        if r is not None:
            r.close()

    def fill(self, v: Views, plan: BatchRuns, read: set[tuple[int, int]] | None = None) -> set[int]:
        """Write the data of batch ``plan.k`` but the runs ``read`` as it was planned, (row, first step) each. Returns
        the rows that end the batch holding a stream that ran out before its promise."""
        tracer = self.tracer
        began = time.perf_counter() if tracer is not None else 0.0
        T = len(v.valid)
        short: set[int] = set()
        readers, copy = self.readers, self._blocks if self.blocks else self._steps
        dests = v.row_columns() if self.blocks else v.row_steps()
        whole = (plan.whole, plan.item, plan.pos, plan.stop, plan.expect, plan.seg_end)
        for b, item, p, stop, expect, seg_end in zip(*(a.tolist() for a in whole), strict=True):
            if read and (b, 0) in read:
                continue
            r = readers.get(b)
            if r is not None and r.pos == p and r.item == item and p + T < stop and not r.dead:
                got = copy(r, dests[b], 0, T)  # the usual row: its open stream goes on past the batch
                if got < T:
                    self._ran_out(v, b, r, got, T, expect)
                    short.add(b)
            elif self._run(v, dests, (b, 0, T, item, p, False, False, stop, expect, seg_end), T):
                short.add(b)
        for run in plan.runs:
            if not (read and (run[0], run[1]) in read) and self._run(v, dests, run, T):
                short.add(run[0])
        for b, _, t1 in plan.pads:  # a row that pads to the batch's end holds no open stream
            if t1 == T:
                self.drop(b)
        if tracer is not None:
            tracer.read(plan.k, began, time.perf_counter(), len(plan.whole) + len(plan.runs))
        return short

    def _run(self, v: Views, dests: list[Any], run: Run, T: int) -> bool:
        """One run's steps; True if it ends the batch holding a stream that ran out before its promise."""
        b, t0, n, item, p, _, fresh, stop, expect, seg_end = run
        r = self.readers.get(b)
        if r is None or fresh or r.item != item or r.pos != p:
            self.drop(b)
            r = self.readers[b] = self._open(item, p)
        got = 0 if r.dead else (self._blocks if self.blocks else self._steps)(r, dests[b], t0, n)
        if got < n:
            self._ran_out(v, b, r, t0 + got, t0 + n, expect)
        if p + n == stop:  # the stream is over as planned: report it if it goes on past its promise
            if not r.dead and stop == expect != seg_end and self._look_ahead(r):
                self.faults.mismatch(r.item, stop, expect, "goes on past them")
            self.drop(b)
            return False
        return r.dead and t0 + n == T

    def _ran_out(self, v: Views, b: int, r: Reader, t: int, t1: int, expect: int) -> None:
        """Row ``b``'s stream ended (reported) or failed (reported where it failed) before batch step ``t``: pad."""
        if not r.dead:
            r.dead = True
            self.faults.mismatch(r.item, r.pos, expect, f"ended after {r.pos} steps")
        pad(v, b, t, t1)
        r.pos += t1 - t

    def _open(self, item: int, pos: int) -> Reader:
        """Stream ``item`` from step ``pos``, transformed; a dead reader if it failed to open under "skip"."""
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
        """The stream's next step or block, or ``_END`` (the reader dead if it failed under "skip")."""
        assert r.it is not None
        self.mark[0], self.mark[1], self.mark[2] = r.item, r.pos, READING
        try:
            return next(r.it, _END)
        except SOURCE_ERRORS as exc:  # reported (under "raise", or for a broken step, this raises): the row is dead
            self.faults.fail(r.item, r.pos, exc, "reading")
            r.dead = True
            return _END

    def _block(self, r: Reader, block: Any) -> list[np.ndarray]:
        return block_arrays(block, self.spec, lambda: self.faults.where(r.item, r.pos, "block at step"))

    def _look_ahead(self, r: Reader) -> bool:
        """Whether the stream has a step after those read (the one read to know is kept for the next read)."""
        if r.it is None or r.ahead is not _END or (r.blk is not None and r.j < len(r.blk[0])):
            return r.it is not None
        got = self._next(r)
        if got is _END or r.dead:
            return False
        if self.blocks:
            r.blk, r.j = self._block(r, got), 0
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
        got = self._blocks(r, v.row_columns()[b], t0, n) if self.blocks else self._steps(r, v.row_steps()[b], t0, n)
        self.read.add((b, t0))
        if got == n and not r.dead and self._look_ahead(r):
            return OPEN
        self.drop(b)
        return got

    def _blocks(self, r: Reader, cols: list[np.ndarray], t0: int, n: int) -> int:
        """Copy up to ``n`` steps of the row's blocks, each checked once, into batch steps ``t0 ..``."""
        got = 0
        while got < n:
            blk, j = r.blk, r.j
            if blk is None or j >= len(blk[0]):
                block = self._next(r)
                if block is _END:
                    break
                blk, j = r.blk, r.j = self._block(r, block), 0
            m = min(n - got, len(blk[0]) - j)
            t = t0 + got
            for col, src in zip(cols, blk, strict=True):
                col[t : t + m] = src[j : j + m]
            r.j, r.pos, got = j + m, r.pos + m, got + m
        self.steps += got
        return got

    def _steps(self, r: Reader, dests: list[list[np.ndarray]], t0: int, n: int) -> int:
        """Copy up to ``n`` steps of the row's stream into batch steps ``t0 ..`` (``dests``: the row's step views per
        field), each checked: the loop a hand-written reader runs. Returns the steps copied."""
        it = r.it
        assert it is not None
        if r.ahead is not _END:  # the step read ahead where the length is open comes first
            it, r.ahead = itertools.chain((r.ahead,), it), _END
        pos, mark, marked, nd = r.pos, self.beat, self.steps_marked, np.ndarray
        mark[0], mark[1], mark[2] = r.item, pos, READING  # the stream read: a death or a stall names it
        t = 0
        try:
            if len(dests) == 1:  # one field: no loop over fields
                ((name, shape, dtype),) = self.spec
                for dst, step in zip(dests[0][t0 : t0 + n], it, strict=False):
                    try:
                        a = step[name]
                    except (LookupError, TypeError):
                        a = None
                    # dtype by identity: a builtin dtype is one object (an equal other one is checked again)
                    if type(a) is not nd or a.dtype is not dtype or a.shape != shape:
                        a = self._field(r, t, step, 0)
                    dst[...] = a
                    t += 1
                    if marked:
                        mark[1] = pos + t  # the step read next
            else:
                spec = self.spec
                for dsts, step in zip(zip(*(col[t0 : t0 + n] for col in dests), strict=True), it, strict=False):
                    for f, (dst, (name, shape, dtype)) in enumerate(zip(dsts, spec, strict=True)):
                        try:
                            a = step[name]
                        except (LookupError, TypeError):
                            a = None
                        if type(a) is not nd or a.dtype is not dtype or a.shape != shape:
                            a = self._field(r, t, step, f)
                        dst[...] = a
                    t += 1
                    if marked:
                        mark[1] = pos + t
        except SOURCE_ERRORS as exc:  # the source's ``next()`` (a broken step raises ``StepSpecError`` through)
            self.faults.fail(r.item, pos + t, exc, "reading")
            r.dead = True
        r.pos = pos + t
        self.steps += t
        return t

    def _field(self, r: Reader, t: int, step: Any, f: int) -> np.ndarray:
        """Field ``f`` of step ``r.pos + t``, converted (a scalar, a list), or ``StepSpecError`` naming it."""
        name, shape, dtype = self.spec[f]
        return step_field(step, name, shape, dtype, lambda: self.faults.where(r.item, r.pos + t, "step"))


class ProducerTurns:
    """Producer side of the schedule's ``Turns`` (rows of unknown length, each read by the producer that owns it):
    each row publishes the key of its next possible claim (a lower bound while its stream is open), and a claim is
    made only when its key is the smallest of all, so the shared tickets come in the order the lengths give. A new
    generation ``gen`` aborts a wait; ``idle()`` and ``busy()`` tell the others when this producer waits."""

    def __init__(
        self,
        control: Control,
        lock: AbstractContextManager[Any],
        gen: int,
        mark: np.ndarray,
        idle: Callable[[], None] = lambda: None,
        busy: Callable[[], None] = lambda: None,
    ) -> None:
        self.control, self.lock, self.gen, self.mark, self.idle, self.busy = control, lock, gen, mark, idle, busy

    def ready(self, key: int) -> bool:
        return self.control.earliest_claim() >= key

    def wait(self, b: int, key: int) -> None:
        control, spins = self.control, 0
        if self.ready(key):
            return
        self.idle()
        while control.earliest_claim() < key:
            if control.generation != self.gen:
                raise Aborted
            self.mark[0] = -1  # reading nothing meanwhile: a timeout or a death now is not this source's
            spins += 1
            time.sleep(min(_NAP_S, 2e-6 * spins))
        self.busy()

    def ticket(self) -> int:
        with self.lock:  # orders the ticket counter between processes
            return self.control.take_ticket()

    def publish(self, b: int, key: int | None) -> None:
        self.control.set_claim(b, NEVER if key is None else key)
