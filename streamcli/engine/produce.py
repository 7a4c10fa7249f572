"""Where a batch is born: each producer steps its rows' streams into a slot, in canonical (step, row) order.

Determinism for any number of workers comes from one rule. A row that needs a new stream takes the next
*ticket* (an index into this epoch's shuffled order) only when every position before its own, in canonical
order ``key = (batch * T + t) * B + row``, has been decided by every producer. Each producer publishes its
progress as ``front[w]``, the smallest key it has not decided yet. So the ticket a row gets, and hence every
batch, depends only on the streams' contents, never on timing or on how rows are split among workers.

Rows look one step ahead, so a producer knows at step t that it is a stream's last one. After each batch a
producer writes every row's cursor into the slot (``engine.cursor``), and it starts an epoch, fresh or resumed, from
a table of cursors (``begin_epoch``): a live row reopens its stream with ``open(item, start=pos)``, so resuming
replays nothing. Everything here is a plain function over plain per-row facts (``Row``), shared by worker
processes and the in-process path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.engine import cursor as _cursor
from streamcli.engine.ring import Ring
from streamcli.errors import SourceError, StepSpecError
from streamcli.source import Field, Step, StreamSource, item_name

_END = object()
_BLK = object()  # the look-ahead step lies in the row's current block
_NO_END = 1 << 62


class Aborted(Exception):
    """The loader moved to a new generation (new epoch, or closing); drop the current batch."""


@dataclass(frozen=True)
class Plan:
    """The static facts every producer shares: the plugin's name, its fields and the loader's one configuration.
    Picklable. The settings are read from ``config``, never copied."""

    plugin: str
    fields: tuple[Field, ...]
    config: LoaderConfig

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    @property
    def time_steps(self) -> int:
        return self.config.time_steps

    @property
    def boundary(self) -> str:
        return self.config.boundary

    @property
    def epoch_end(self) -> str:
        return self.config.epoch_end

    @property
    def on_error(self) -> str:
        return self.config.on_error

    @property
    def segment(self) -> int:
        return self.config.segment


@dataclass
class Row:
    """What one batch row is doing. ``it``/``nxt`` are derived: resume reopens ``item`` at ``pos``."""

    b: int
    item: int = -1  # index into items(), -1 before the first claim
    pos: int = 0  # index within the stream of the next step to write
    replay: bool = False
    fresh: bool = False  # the next step written is the first of a claim
    done: bool = False  # a claim failed: no more streams this epoch
    it: Iterator[Step] | None = None
    nxt: Any = None  # the looked-ahead step
    reopen: bool = False  # resumed mid-stream: open ``item`` at ``pos`` before the next step
    end: int = _NO_END  # the position at which the current stream (segment) ends
    follow: bool = False  # the segment ended, the item goes on: the next step starts its next segment
    expect: int = -1  # the position at which the item ends, if ``length()`` said so (checked, not trusted)
    blk: list[np.ndarray] | None = None  # block sources: the current block's arrays, in field order
    j: int = 0  # the next step's index in ``blk``
    open_ended: bool = False  # an item of unknown length cut into segments: they follow on this row

    def cursor(self) -> tuple[int, int, int, int]:
        if self.done:
            state = _cursor.DRY
        elif self.follow:
            state = _cursor.FOLLOW
        else:
            state = _cursor.LIVE if (self.it is not None or self.reopen) else _cursor.IDLE
        return _cursor.record(self.item, self.pos, state, self.replay, self.open_ended)


@dataclass(frozen=True)
class Skip:
    """An item skipped under on_error="skip" (``kind="skip"``), or a stream whose length differs from what
    ``length()`` promised (``kind="length"``; ``error`` says both numbers), reported with the batch in which it
    happened."""

    batch: int
    item: int
    name: str
    step: int
    error: str
    kind: str = "skip"


@dataclass
class Producer:
    """One producer's context: a worker process, or the main process when num_workers=0."""

    plan: Plan
    source: StreamSource
    items: Sequence[Any]
    ring: Ring
    w: int  # this producer's index in the control block
    rows: list[Row]
    lock: AbstractContextManager[Any]
    gen: int = 0
    on_skip: Callable[[Skip], None] = lambda s: None
    parent_pid: int | None = None  # workers: exit if the parent is gone
    blocks: bool = False  # the source yields blocks of steps (``block_steps = True``)
    others: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def new_rows(lo: int, hi: int) -> list[Row]:
    return [Row(b) for b in range(lo, hi)]


def rows_from(cursors: np.ndarray, lo: int, segment: int) -> list[Row]:
    """Rows ``lo, lo+1, ...`` as the cursor records say; live ones reopen lazily, at their next step.

    Segments start at multiples of ``segment`` in their item, so a live row at ``pos`` ends its segment at the
    next multiple (it has written at least one step of it, hence the ``pos - 1``)."""
    rows = []
    for i, (item, pos, state, flags) in enumerate(cursors.tolist()):
        row = Row(lo + i, item=item, pos=pos, replay=bool(flags & _cursor.REPLAYED))
        row.open_ended = bool(flags & _cursor.OPEN_ENDED)
        row.done = state == _cursor.DRY
        row.reopen = state in (_cursor.LIVE, _cursor.FOLLOW)
        row.follow = state == _cursor.FOLLOW
        if segment and state == _cursor.LIVE:
            row.end = ((pos - 1) // segment + 1) * segment
        rows.append(row)
    return rows


def begin_epoch(p: Producer, gen: int) -> None:
    """Start (or resume) an epoch from the cursor table in the control block: the one way in-process and worker
    producers begin. The loader has already written the table, the order, the tickets and the first batch."""
    close_rows(p.rows)
    lo, hi = p.rows[0].b, p.rows[-1].b + 1
    p.gen = gen
    control = p.ring.control
    p.rows = rows_from(control.cursors(lo, hi), lo, p.plan.segment)
    first = control.first_batch
    control.begin(p.w, first * p.plan.time_steps * p.plan.batch_size + lo, first)


def close_rows(rows: Sequence[Row]) -> None:
    for row in rows:
        _close(row)


def fill_batch(p: Producer, slot: int, k: int) -> None:
    """Write this producer's rows of batch ``k`` into ``slot``; raises ``Aborted`` on a generation change."""
    plan, ring, rows = p.plan, p.ring, p.rows
    T, B = plan.time_steps, plan.batch_size
    v = ring.tb_slots[slot]
    data = [(f.name, f.shape, f.np_dtype, v[f.name]) for f in plan.fields]
    lo, hi = rows[0].b, rows[-1].b + 1
    tally = [0, 0]  # tickets taken, failed claims: this producer's share of the slot's summary
    # Flags are gathered in lists and written once per batch: per-step numpy scalar writes cost more than
    # the step itself for small frames. Defaults describe padding.
    n = T * (hi - lo)
    first, valid, rep = [False] * n, [False] * n, [False] * n
    stream, position = [-1] * n, [-1] * n
    control = ring.control
    pack = plan.boundary == "pack"
    segment, blocks = plan.segment, p.blocks
    t_start, waited, steps, i = time.perf_counter(), 0.0, 0, 0
    for row in rows:
        if row.reopen:
            _reopen(p, row, k)
    for t in range(T):
        if control.generation != p.gen:
            raise Aborted
        base = (k * T + t) * B
        control.set_front(p.w, base + lo)  # a lower bound of every position this producer decides at step t
        for row in rows:
            b = row.b
            if (row.it is None or row.follow) and not row.done and (t == 0 or pack):
                if row.follow:  # the item's next segment, on the same row: no ticket, no wait
                    row.follow, row.fresh, row.end = False, True, row.pos + segment
                else:
                    waited += _claim(p, row, base + b, tally, k)
            if row.it is None or row.follow:
                for _, _, _, arr in data:
                    arr[t, b] = 0
                i += 1
                continue
            step = row.nxt
            if step is _BLK:  # a block source: copy straight from the checked block, no per-step mapping
                blk, j = row.blk, row.j
                assert blk is not None
                for (_, _, _, arr), src in zip(data, blk, strict=True):
                    arr[t, b] = src[j]
            else:
                try:
                    for name, shape, dtype, arr in data:
                        a = step[name]
                        if type(a) is not np.ndarray or a.shape != shape or a.dtype != dtype:
                            a = _checked(p, row, step, name, shape, dtype)
                        arr[t, b] = a
                except (KeyError, TypeError, IndexError):
                    _checked(p, row, step, name, shape, dtype)  # raises the precise error
                    raise
            first[i], valid[i], stream[i], position[i], rep[i] = row.fresh, True, row.item, row.pos, row.replay
            row.fresh = False
            row.pos += 1
            steps += 1
            i += 1
            if row.pos == row.end and not row.open_ended:
                _close(row)  # the segment is over; the item's next one is a stream of its own
                continue
            if blocks:
                row.nxt = _next(p, row, k)
            else:  # inline: this is the per-step path of every step source
                try:
                    row.nxt = next(row.it, _END)
                except Exception as exc:
                    _fail(p, row, k, exc, "reading")
                    row.nxt, row.expect = _END, -1  # skipped, not short
            if row.nxt is _END:
                if row.expect >= 0 and row.pos != row.expect:
                    _mismatch(p, row, k, f"ended after {row.pos} steps")
                _close(row)
            elif row.pos == row.expect:  # it goes on past the promised length: cut it there, as len() counted
                _mismatch(p, row, k, "goes on past them")
                _close(row)
            elif row.pos == row.end:
                row.follow = True
    shape2 = (T, hi - lo)
    v["is_first"][:, lo:hi] = np.array(first, bool).reshape(shape2)
    v["valid"][:, lo:hi] = np.array(valid, bool).reshape(shape2)
    v["stream"][:, lo:hi] = np.array(stream, np.int64).reshape(shape2)
    v["position"][:, lo:hi] = np.array(position, np.int64).reshape(shape2)
    v["replayed"][:, lo:hi] = np.array(rep, bool).reshape(shape2)
    # One record per producer, so the loader reads four counts with one sum instead of scanning flags.
    live = sum(r.it is not None and not r.replay for r in rows)
    v["summary"][p.w] = (tally[0], tally[1], live, steps)
    v["cursor"][lo:hi] = [row.cursor() for row in rows]
    control.set_front(p.w, (k + 1) * T * B + lo)  # everything before the next batch is decided
    last = rows[-1]
    control.report(p.w, time.perf_counter() - t_start - waited, steps, last.item, last.pos, k + 1)


def _claim(p: Producer, row: Row, key: int, tally: list[int], k: int) -> float:
    """Give ``row`` its next stream at canonical position ``key``; returns seconds spent waiting."""
    waited = _wait_turn(p, key)
    control = p.ring.control
    n = control.num_streams
    segment = p.plan.segment
    empty_replays = 0
    while True:
        with p.lock:  # the lock orders the ticket counter between processes
            ticket = control.take_ticket()
        tally[0] += 1
        replay = ticket >= n
        if replay and (p.plan.epoch_end != "restream" or n == 0 or empty_replays >= n):
            row.done = True
            tally[1] += 1
            return waited
        item, start, open_ended, length = control.stream(ticket)
        row.item, row.pos, row.replay, row.fresh, row.open_ended = item, start, replay, True, open_ended
        row.end = start + segment if segment else _NO_END
        row.expect = start + length if length >= 0 and not segment else -1
        row.it = _open(p, row, k)
        row.nxt = _END if row.it is None else _next(p, row, k)
        if row.nxt is not _END:
            return waited
        _close(row)  # an empty (or skipped) stream: take the next ticket at the same position
        empty_replays += replay


def _wait_turn(p: Producer, key: int) -> float:
    """Block until every other producer has decided all positions before ``key``."""
    if not len(p.others):
        return 0.0
    control = p.ring.control
    start = time.perf_counter()
    spins = 0
    while control.min_front(p.others) <= key:
        if control.generation != p.gen:
            raise Aborted
        if p.parent_pid is not None and os.getppid() != p.parent_pid:
            raise SystemExit(0)  # orphaned: the loader is gone
        spins += 1
        time.sleep(0 if spins < 50 else min(1e-3, 2e-5 * spins))
    return time.perf_counter() - start


def _open(p: Producer, row: Row, k: int) -> Iterator[Step] | None:
    try:
        it = iter(p.source.open(p.items[row.item], row.pos))
    except Exception as exc:
        _fail(p, row, k, exc, "opening")
        return None
    return it


def _checked_block(p: Producer, row: Row, block: Any, fields: Sequence[Field]) -> int:
    """The block's step count ``n``; raise ``StepSpecError`` if a field is missing, mis-shaped or of n != the rest."""
    where = f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} block at step {row.pos}"
    n = -1
    for f in fields:
        try:
            a = block[f.name]
        except (KeyError, TypeError, IndexError):
            raise StepSpecError(
                f"{where}: the block has no field {f.name!r} (got {type(block).__name__}); with block_steps=True "
                "yield a dict of (n, *shape) arrays, one per declared field"
            ) from None
        if type(a) is not np.ndarray:
            a = np.asarray(a)
        if a.ndim != len(f.shape) + 1 or a.shape[1:] != f.shape or a.dtype != f.np_dtype or len(a) < 1:
            raise StepSpecError(
                f"{where}: field {f.name!r} is {a.dtype.name}{list(a.shape)} but a block of n >= 1 steps must be "
                f"{f.np_dtype.name}[n, {', '.join(map(str, f.shape))}]; make the block match fields()"
            )
        if n >= 0 and len(a) != n:
            raise StepSpecError(f"{where}: fields of one block must have the same n steps; {f.name!r} has {len(a)}, "
                                f"another has {n}")  # fmt: skip
        n = len(a)
    return n


def _reopen(p: Producer, row: Row, k: int) -> None:
    """Continue a resumed row's stream at ``row.pos``: ``open(item, start=pos)``, nothing replayed."""
    row.reopen = False
    row.it = _open(p, row, k)
    row.nxt = _END if row.it is None else _next(p, row, k)
    if row.nxt is _END:
        _close(row)  # the stream ended exactly at the cut (or failed): the row claims at its next chance


def _next(p: Producer, row: Row, k: int) -> Any:
    """The row's look-ahead: the next step, ``_BLK`` when it is ``row.blk[...][row.j]``, or ``_END``."""
    assert row.it is not None
    if p.blocks:
        if row.blk is not None:
            row.j += 1
            if row.j < len(row.blk[0]):
                return _BLK
        try:
            block: Any = next(row.it, _END)
        except Exception as exc:
            _fail(p, row, k, exc, "reading")
            row.expect = -1  # skipped, not short
            return _END
        if block is _END:
            return _END
        _checked_block(p, row, block, p.plan.fields)
        row.blk, row.j = [np.asarray(block[f.name]) for f in p.plan.fields], 0
        return _BLK
    try:
        return next(row.it, _END)
    except Exception as exc:
        _fail(p, row, k, exc, "reading")
        row.expect = -1  # skipped, not short
        return _END


def _fail(p: Producer, row: Row, k: int, exc: Exception, doing: str) -> None:
    if isinstance(exc, StepSpecError):
        raise exc  # a block that breaks the declared fields is the plugin's bug: never skipped, never wrapped
    name = item_name(p.source, p.items[row.item])
    if p.plan.on_error == "skip":
        error = f"{type(exc).__name__}: {exc}"
        p.on_skip(Skip(batch=k, item=row.item, name=name, step=row.pos, error=error))
        return
    err = SourceError(
        f"plugin {p.plan.plugin!r} failed {doing} item {name!r} (stream {row.item}) at step {row.pos}: "
        f"{type(exc).__name__}: {exc}"
    )
    raise err from exc


def _mismatch(p: Producer, row: Row, k: int, what: str) -> None:
    name = item_name(p.source, p.items[row.item])
    msg = f"item {name!r} (stream {row.item}): length() said {row.expect} steps but it {what}"
    p.on_skip(Skip(batch=k, item=row.item, name=name, step=row.pos, error=msg, kind="length"))


def _checked(p: Producer, row: Row, step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """The slow path of the per-step check: convert scalars and lists, or raise naming what is wrong."""
    try:
        a = step[name]
    except (KeyError, TypeError, IndexError):
        raise StepSpecError(
            f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} step {row.pos}: "
            f"the step has no field {name!r} (got {type(step).__name__}); yield a dict with every declared field"
        ) from None
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.shape != shape or a.dtype != dtype:
        raise StepSpecError(
            f"plugin {p.plan.plugin!r} item {item_name(p.source, p.items[row.item])!r} step {row.pos}: field "
            f"{name!r} is {a.dtype.name}{list(a.shape)} but the source declared {dtype.name}{list(shape)}; "
            "make the step match fields() (e.g. resize or .astype)"
        )
    return a


def _close(row: Row) -> None:
    it, row.it, row.nxt, row.follow, row.blk = row.it, None, None, False, None
    close = getattr(it, "close", None)
    if callable(close):
        try:
            close()  # release generators' files promptly
        except Exception:
            pass
