"""Where a batch is assembled and handed out: ``StreamLoader``.

The main process owns the shared-memory ring and only hands out slots: it writes "batch k goes into slot s" into
the control block's hand-out counter (producers run ahead as far as it allows), waits until every row of batch
k is written, and yields the slot as a ``Batch`` of zero-copy tensors. When the consumer drops the batch (and
every tensor taken from it) the slot goes back to the free list.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamcli.batch import FLAGS, Batch
from streamcli.config import LoaderConfig
from streamcli.errors import SourceError, StateError
from streamcli.fills.checks import check_fields, short_repr
from streamcli.fills.claimed.produce import begin_epoch, fill
from streamcli.fills.claimed.rows import Producer, epoch_rows
from streamcli.fills.claimed.write import close_rows
from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec, Skip
from streamcli.lives.ahead import Ahead
from streamcli.lives.control import Aborted
from streamcli.lives.ring import Ring, default_prefetch
from streamcli.lives.slots import Slots
from streamcli.lives.tensors import import_torch, pad_slot, pin_available, split_rows
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled import state as _state
from streamcli.scheduled.claims import count_batches
from streamcli.scheduled.seek import state_after
from streamcli.scheduled.streams import Streams, all_streams, epoch_streams, rank_batches
from streamcli.source import (
    Field,
    StreamSource,
    call_default_segment,
    check_source,
    item_name,
    plugin_name,
    source_lookup,
    stream_order_of,
    uses_blocks,
)
from streamcli.stats import LoaderStats
from streamcli.workers.main_guard import check_main_guard
from streamcli.workers.pool import WorkerPool, shutdown
from streamcli.workers.worker import WorkerSpec

log = logging.getLogger("streamcli")
AHEAD = 2  # batches the ``Ahead`` thread prepares before the consumer asks


@dataclass
class _Ready:
    """Batch ``k`` prepared for hand-out, with what the loader's position becomes once it is handed out."""

    k: int
    batch: Batch | None  # None: all padding, not handed out
    last: bool  # the epoch ends with it
    tickets: int  # tickets taken up to the end of it
    cursors: np.ndarray | None  # every row's cursor after it (None when last)
    n_live: int  # rows holding a live original stream after it
    n_valid: int
    skips: list[Skip]
    dropped: bool = False  # "drop": the epoch ended before this batch, which is not handed out


def _calling(plugin: str, doing: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, a call into the source in the main process; what it raises becomes a ``SourceError``."""
    try:
        return fn()
    except (Exception, SystemExit) as exc:
        raise SourceError(f"plugin {plugin!r} failed {doing}: {type(exc).__name__}: {exc}") from exc


class StreamLoader:
    """Temporally coherent batches from many streams of one source.

    A source with ``block_steps = True`` yields blocks (field -> array of ``n`` steps) instead of steps; the
    loader splits them across batches (``supports_blocks`` says this loader can).

    Args:
        source: a ``StreamSource`` (see ``streamcli.source``), e.g. ``load_source("text", "books/")``.
        batch_size: B, the number of rows; each row carries one stream at a time.
        time_steps: T, the steps per row per batch.
        num_workers: producer processes; a row's next stream goes to whichever is free. 0 runs in-process.
        seed, shuffle: the stream order is ``default_rng([seed, epoch]).permutation`` unless shuffle=False.
        boundary: "pad" (after a stream ends the rest of its row is padding; the next starts at the next
            batch) or "pack" (the next stream starts at the very next step).
        epoch_end: "pad" (every step of every stream exactly once; idle rows are padding), "restream"
            (idle rows replay streams, flagged in ``batch.replayed``) or "drop" (stop when a row runs dry).
        layout: "TB" for (T, B, ...) tensors, "BT" for (B, T, ...).
        on_error: "raise" (a source exception stops the epoch with a ``SourceError``) or "skip" (the item
            ends where it failed, is logged on the ``streamcli`` logger and counted in ``stats.skipped``).
        pin_memory: copy batches into page-locked memory when CUDA is present (warns once otherwise).
        prefetch: batches the workers may write ahead of the consumer. By default (None) as many as fit in
            256 MiB and in a quarter of the free shared memory, from 4 to 16. In-process (4 by default) it only
            sets how many batches the consumer may keep before later ones are copies.
        timeout: seconds without progress before a ``WorkerError`` (None: wait as long as workers live). Needs
            ``num_workers >= 1``: in-process a hung source cannot be stopped safely, so the pair is refused.
        mp_context: multiprocessing start method for workers; "spawn" is the safe default.
        segment: cut every item into streams of at most this many steps (0: whole items). Each segment is a
            stream of its own (its own ticket, ``is_first`` at its first step; ``batch.position`` stays the
            step's index in the item), opened with ``open(item, start=k*segment)``. Items of unknown length
            are cut too: the next segment starts on the same row once the item is seen to go on.
        batches_per_epoch: yield exactly this many batches every epoch, cutting the epoch or continuing it
            with padding (replays under ``epoch_end="restream"``); ``len()`` is then this number.
        rank, world_size: this process's share of every epoch's streams under ``torch.distributed``; by
            default from the initialised process group, else ``RANK``/``WORLD_SIZE``, else 0 of 1. Every rank
            yields the same number of batches per epoch (the most any rank needs; the fewest with "drop").

    Batches for the same source, seed, sizes and modes are bit-identical for every ``num_workers``.
    Iterating the loader again starts the next epoch. Use it as a context manager, or call ``close()``.
    """

    supports_blocks = True  # sources with ``block_steps = True`` are read block by block

    def __init__(
        self,
        source: StreamSource,
        batch_size: int,
        time_steps: int,
        *,
        num_workers: int = 0,
        seed: int = 0,
        shuffle: bool = True,
        boundary: str = "pad",
        epoch_end: str = "pad",
        layout: str = "TB",
        on_error: str = "raise",
        pin_memory: bool = False,
        prefetch: int | None = None,
        timeout: float | None = None,
        mp_context: str = "spawn",
        segment: int = 0,
        batches_per_epoch: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        import_torch()  # first, so a signal during it finds no process or segment to clean up
        self.source = check_source(source)
        segment = segment or call_default_segment(source)  # e.g. the video source's own segment=N
        config = LoaderConfig(
            batch_size, time_steps, num_workers=num_workers, seed=seed, shuffle=shuffle, boundary=boundary,
            epoch_end=epoch_end, layout=layout, on_error=on_error, pin_memory=pin_memory, prefetch=prefetch,
            timeout=timeout, mp_context=mp_context, segment=segment, batches_per_epoch=batches_per_epoch,
            rank=rank, world_size=world_size,
        )  # fmt: skip
        self.config = config
        # Plain attributes for reading; the configuration itself is ``self.config`` (frozen).
        self.batch_size, self.time_steps, self.num_workers = config.batch_size, config.time_steps, config.num_workers
        self.seed, self.shuffle, self.layout = config.seed, config.shuffle, config.layout
        self.boundary, self.epoch_end, self.on_error = config.boundary, config.epoch_end, config.on_error
        self.pin_memory, self.timeout = config.pin_memory, config.timeout
        self.segment, self.batches_per_epoch = config.segment, config.batches_per_epoch
        assert config.rank is not None and config.world_size is not None
        self.rank, self.world_size = config.rank, config.world_size
        self.plugin = plugin_name(source)
        fields = _calling(self.plugin, "declaring its fields", lambda: tuple(source.fields()))
        check_fields(fields)
        self.fields: tuple[Field, ...] = fields
        self.items: list[Any] = _calling(self.plugin, "listing its items", lambda: list(source.items()))
        self._lengths: list[int | None] | None = None
        needs_lengths = bool(segment) or self.world_size > 1
        self._all_streams = all_streams(self._item_lengths() if needs_lengths else [None] * len(self.items), segment,
                                        stream_order_of(source))  # fmt: skip
        self._source_lookup = source_lookup(source)  # a mix: ``batch.source`` from ``batch.stream``
        if self.world_size > 1 and self._all_streams.lengths is None and batches_per_epoch is None:
            raise ValueError(
                f"world_size={self.world_size} needs every stream's length so that all ranks yield the same number "
                f"of batches, but source {self.plugin!r} does not report them all; make it report lengths (for "
                "video: scan=True) or pass batches_per_epoch=N"
            )
        self.plan = FillSpec(plugin=self.plugin, fields=fields, config=config)
        producers = max(num_workers, 1)
        # Slots: ``prefetch`` being filled, plus the one the consumer holds, one being assembled and those
        # prepared ahead of it.
        extra = 2 + (AHEAD if num_workers else 0)
        shape = (fields, self.batch_size, self.time_steps, self.layout, num_workers, extra)
        if prefetch is None:
            prefetch = default_prefetch(*shape)
        self.prefetch = prefetch
        self.ring = Ring.create(
            dict(fields=fields, batch_size=self.batch_size, time_steps=self.time_steps,
                 num_slots=prefetch + extra,
                 num_workers=producers, num_streams=len(self._all_streams), layout=self.layout,
                 num_items=len(self.items)),
        )  # fmt: skip
        self._slots = Slots(self.ring.reserved)  # which slot holds which batch (the lifetime guarantee)
        self._names = [f.name for f in self.fields] + list(FLAGS)  # the arrays of a batch, in slot order
        self._pending: dict[int, list[Skip]] = {}  # batch index -> skips reported with it
        self._tickets = 0  # tickets taken up to the position below
        self._cursor = _cursor.fresh(batch_size)  # every row's cursor after the last batch handed out
        self._pos_epoch, self._pos_batch = 0, 0
        self._epoch_skips: list[Any] = []  # [item, step] of this epoch's skipped items, up to the position
        self._resume: dict[str, Any] | None = None  # a loaded state, used by the next iter()
        self._n_streams = len(self._all_streams)  # this epoch's streams (this rank's share)
        self._epoch_target: int | None = None  # batches this epoch must yield (None: its natural end)
        self._dropped = False
        self._fingerprint_cache: dict[str, Any] | None = None
        self._k = 0  # the batch being waited for or consumed
        self._k_next = 0  # the next batch to hand out
        self._waited = False  # preparing the last batch waited for the workers (read by ``Ahead``)
        self._pin: bool | None = None
        self._pinned_ring = False
        self._epoch = -1
        self._active = False  # an epoch is being iterated
        self._gen = 0
        self._closed = False
        self._bounds = split_rows(batch_size, producers)
        self._local: Producer | None = None
        self._filler: Filler | None = None  # in-process, the planned path (``streamcli.fills``)
        self._pool: WorkerPool | None = None
        self._ahead: Ahead[_Ready] | None = None  # the thread preparing batches (with workers)
        self._finalizer = weakref.finalize(self, shutdown, None, self.ring)
        # statistics
        self._t_created = time.perf_counter()
        self._t_first_next: float | None = None
        self._first_batch_s: float | None = None
        self._waits: deque[float] = deque(maxlen=1000)
        self._batches = self._steps = self._bytes = self._copies = self._skipped = self._mismatches = 0
        self._busy_hist: deque[tuple[float, np.ndarray]] = deque(maxlen=64)
        self._streams_done = 0
        self._batch_bytes = sum(f.nbytes for f in fields) * batch_size * time_steps
        pending = self._pending

        # Closures over data, not bound methods: the finalizer holds the pool, and must not hold self.
        def on_skip(skip: Skip) -> None:
            pending.setdefault(skip.batch, []).append(skip)

        if num_workers:
            if mp_context != "fork":
                check_main_guard()
            self._check_picklable()
            specs = [
                WorkerSpec(w=w, lo=lo, hi=hi, plan=self.plan, ring=self.ring.spec, source=source, items=self.items)
                for w, (lo, hi) in enumerate(self._bounds)
            ]
            items_ = self.items
            self._pool = WorkerPool(specs, self.ring, mp_context, lambda i: item_name(source, items_[i]))
            self._pool.on_skip = on_skip
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, shutdown, self._pool, self.ring)
        else:
            self._local = Producer(
                plan=self.plan, source=source, items=self.items, ring=self.ring, w=0,
                lock=contextlib.nullcontext(), blocks=uses_blocks(source),
            )  # fmt: skip
            self._local.on_skip = on_skip
            self._filler = Filler(self.plan, source, self.items, self.ring, 0, 1, 0, self.batch_size, on_skip)

    def _check_picklable(self) -> None:
        try:
            pickle.dumps(self.source)
        except Exception as exc:
            self.close()
            raise TypeError(
                f"source {self.plugin!r} cannot be pickled for worker processes ({exc}); make it a "
                "module-level class holding only paths and options, or use num_workers=0"
            ) from exc
        for i, item in enumerate(self.items):
            try:
                pickle.dumps(item)
            except Exception as exc:
                self.close()
                raise TypeError(
                    f"item {i} of source {self.plugin!r} ({short_repr(item)}) cannot be pickled: "
                    f"{type(exc).__name__}: {exc}; worker processes receive every item, so items() must return "
                    "plain data (paths, numbers, tuples), or use num_workers=0"
                ) from exc

    # -------------------------------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[Batch]:
        """The next epoch's batches (or a loaded state's). The epoch starts at the iterator's first ``next()``, not
        here: an iterator that is made and dropped unused (Lightning makes one to check the loader) takes no epoch,
        no loaded state and no position, and an older iterator is superseded only once a newer one starts."""
        if self._closed:
            raise RuntimeError("this StreamLoader is closed; create a new one")
        return self._epoch_batches()

    def _epoch_batches(self) -> Iterator[Batch]:
        yield from self._start()

    def _start(self) -> Iterator[Batch]:
        """Start the next epoch (or the loaded state's), superseding any older iterator."""
        if self._closed:
            raise RuntimeError("this StreamLoader is closed; create a new one")
        self._stop_ahead()
        self._gen += 1
        resume, self._resume = self._resume, None
        if resume is None:
            self._epoch += 1
            cursors, first, tickets, skipped = _cursor.fresh(self.batch_size), 0, 0, []
        else:
            self._epoch = resume["epoch"]
            cursors = _cursor.from_json(resume["rows"], self.batch_size, len(self.items))
            first, tickets, skipped = resume["batch"], resume["tickets"], [list(s) for s in resume["skipped"]]
        self._set_position(self._epoch, first, tickets, cursors, skipped)
        return self._run(self._gen, self._epoch, first)

    def _set_position(self, epoch: int, batch: int, tickets: int, cursors: np.ndarray, skipped: list[Any]) -> None:
        """Where ``state_dict()`` says the loader stands: right after the last batch handed out."""
        self._pos_epoch, self._pos_batch, self._tickets = epoch, batch, tickets
        np.copyto(self._cursor, cursors)
        self._epoch_skips = skipped

    def _begin_epoch(self, gen: int, epoch: int, first: int) -> None:
        """Stop whatever producers were doing, then set the shared plan for an epoch starting at batch ``first``
        from the cursors in ``self._cursor`` (fresh, or those of a resumed state)."""
        ring = self.ring
        control = ring.control
        control.stage(self._cursor, first)
        control.set_generation(gen)  # producers of an older generation abandon their batch
        self._pending.clear()
        if self._pool is not None:
            self._guarded(self._pool.start_epoch, gen, self.timeout)
        # Only now: a producer of the old generation may still have been taking a ticket until it acknowledged.
        streams = self._streams(epoch)
        self._n_streams, self._epoch_target = len(streams), self._target(epoch)
        control.set_streams(streams.table(self._item_lengths()), self._tickets)
        control.set_rows(*epoch_rows(self._cursor, first, self.time_steps, self._bounds))
        # Under "drop" a dry row means the epoch already ended; with a fixed length it goes on as padding.
        self._dropped = self.epoch_end == "drop" and bool((self._cursor[:, _cursor.STATE] == _cursor.DRY).any())
        if self._local is not None:
            begin_epoch(self._local, gen, 0, self.batch_size)
        if self._filler is not None:
            self._filler.begin(gen)
        control.open_epoch(gen, first)
        self._slots.new_epoch()  # only now: no producer writes the old epoch's slots any more
        state, flags = self._cursor[:, _cursor.STATE], self._cursor[:, _cursor.FLAGS]
        n_live = int((((state == _cursor.LIVE) | (state == _cursor.FOLLOW)) & (flags & _cursor.REPLAYED == 0)).sum())
        self._streams_done = max(0, min(self._tickets, self._n_streams) - n_live)

    def _run(self, gen: int, epoch: int, first: int) -> Iterator[Batch]:
        torch = import_torch()

        if self._pin is None:
            self._pin = pin_available(torch) if self.pin_memory else False
            # Page-lock the whole ring once: batches are then pinned views, with no copy per batch.
            whole = bool(self._pin) and self._back_slots(self.ring.spec.num_slots)  # page-locking touches all
            self._pinned_ring = whole and self.ring.page_lock(torch)
        self._begin_epoch(gen, epoch, first)
        self._active = True
        try:
            yield from self._batches_of(torch, gen, epoch, first)
            if gen == self._gen:  # the epoch ran to its end: the next iter() starts the next one
                self._set_position(epoch + 1, 0, 0, _cursor.fresh(self.batch_size), [])
        finally:
            if gen == self._gen:
                self._active = False

    def _batches_of(self, torch: Any, gen: int, epoch: int, first: int) -> Iterator[Batch]:
        """Hand out the prepared batches. With workers they are prepared by a thread (``Ahead``), so that waiting
        for a batch and building its tensors happen while the consumer works, or inside ``next()`` while the
        consumer waits for the workers anyway; in-process, inside ``next()``."""
        ready: Iterator[_Ready] = self._prepare(torch, gen, epoch, first)
        if self._pool is not None:
            self._ahead = Ahead(ready, AHEAD, self._hand_out, lambda: self._waited)
            ready = self._ahead
        entered = time.perf_counter()  # the consumer's wait: the whole time inside next(), our own work included
        if self._t_first_next is None:
            self._t_first_next = entered
        try:
            while True:
                if self._closed:
                    raise RuntimeError("this StreamLoader was closed while iterating")
                if gen != self._gen:
                    raise RuntimeError("this iterator was superseded by a newer iter(loader)")
                rec = next(ready, None)
                if rec is None:
                    return
                if rec.dropped:
                    return  # "drop": the epoch ended before this batch
                self._hand(rec, epoch)
                if rec.batch is not None:
                    batch, rec.batch = rec.batch, None
                    self._batches += 1
                    self._steps += rec.n_valid
                    self._bytes += self._batch_bytes
                    now = time.perf_counter()
                    self._waits.append(now - entered)
                    if self._first_batch_s is None:
                        self._first_batch_s = now - self._t_created
                    yield batch
                    del batch
                    entered = time.perf_counter()
                if rec.last:
                    return
        except BaseException:
            if self._ahead is not None and ready is self._ahead and self._ahead.failed:
                self.close()  # a failure in the workers: nothing outlives it
            raise
        finally:
            if self._ahead is not None and ready is self._ahead:
                self._stop_ahead()

    def _hand(self, rec: _Ready, epoch: int) -> None:
        """Move the loader's position (``state_dict``) past batch ``rec``, and report its skipped items."""
        for skip in rec.skips:
            if skip.kind == "length":
                self._mismatches += 1
                if self._mismatches == 1:
                    # stacklevel: past _hand, _batches_of, _run and _epoch_batches, to the consumer's loop
                    warnings.warn(f"{skip.error}; len(loader) may be wrong (counted in stats.length_mismatches)",
                                  RuntimeWarning, stacklevel=5)  # fmt: skip
                continue
            self._skipped += 1
            self._epoch_skips.append([skip.item, skip.step])
            log.warning("skipped item %r (stream %d) at step %d: %s", skip.name, skip.item, skip.step,
                        skip.error)  # fmt: skip
        self._streams_done = max(0, min(rec.tickets, self._n_streams) - rec.n_live)
        if rec.last:
            self._set_position(epoch + 1, 0, 0, _cursor.fresh(self.batch_size), [])
        else:
            assert rec.cursors is not None
            self._set_position(epoch, rec.k + 1, rec.tickets, rec.cursors, self._epoch_skips)

    def _prepare(self, torch: Any, gen: int, epoch: int, first: int) -> Iterator[_Ready]:
        """Batches of this epoch as they become whole, assembled: hands out slots ahead, waits for each batch,
        reads its summary. With workers it runs in the ``Ahead`` thread, or in the consumer's while that thread is
        parked."""
        self._k_next = first  # next batch to hand out
        k = first
        tickets = self._tickets
        while True:
            if self._closed or gen != self._gen:
                raise Aborted
            self._k = k
            self._hand_out()
            slot = self._slots.take(k)
            self._wait_done(k)
            v = self.ring.slots[slot]
            skips = self._pending.pop(k, [])
            claims, dry, n_live, n_valid = np.add.reduce(v["summary"], axis=0).tolist()
            target = self._epoch_target
            if self.epoch_end == "drop" and dry and not self._dropped:
                if target is None:
                    self._slots.give_back(slot)
                    yield _Ready(k=k, batch=None, last=True, tickets=tickets, cursors=None, n_live=0, n_valid=0,
                                 skips=skips, dropped=True)  # fmt: skip
                    return
                self._dropped = True
            if self._dropped:  # a fixed-length epoch past its "drop" end: padding
                pad_slot(v, self.fields)
                n_valid = 0
            tickets += claims
            ended = tickets >= self._n_streams and n_live == 0
            last = ended if target is None else k + 1 >= target
            cursors = None if last else v["cursor"].copy()
            batch = None
            if n_valid or target is not None:  # a fixed-length epoch hands out every batch, padding too
                batch = self._assemble(torch, slot, epoch, k)
            else:
                self._slots.give_back(slot)
            yield _Ready(k=k, batch=batch, last=last, tickets=tickets, cursors=cursors, n_live=n_live,
                         n_valid=n_valid, skips=skips)  # fmt: skip
            del batch  # a batch the consumer dropped frees its slot for the next one: reused warm (``_hand_out``)
            if last:
                return
            k += 1

    # ----------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """The position right after the last batch handed out, as plain JSON-serialisable data.

        Save it next to the model's checkpoint; ``load_state_dict`` on a loader with the same source and settings
        (any ``num_workers``) continues from there, bit-identically. Valid at any time: before the first batch,
        mid-epoch and between epochs.
        """
        if self._resume is not None:
            out: dict[str, Any] = json.loads(json.dumps(self._resume))
            return out
        epoch = self._pos_epoch if self._pos_epoch >= 0 else 0
        return {
            "format": _state.FORMAT,
            "version": _state.VERSION,
            "fingerprint": self._fingerprint(),
            "epoch": epoch,
            "batch": self._pos_batch,
            "tickets": self._tickets,
            "rows": _cursor.to_json(self._cursor),
            "skipped": [list(s) for s in self._epoch_skips],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``): the next ``iter(loader)`` resumes that epoch at its next
        batch, reopening each row's stream at its position; the one after starts the following epoch.

        Raises ``StateError`` (a ``ValueError``) naming what differs if the state comes from another source, item
        list or item lengths, batch size, time steps, seed, shuffle or mode, or from another streamcli version, and
        naming the field if a value cannot come from a real run (tampered with). A refused state changes nothing.
        """
        if self._closed:
            raise RuntimeError("this StreamLoader is closed; create a new one")
        state = self._for_this_rank(state)
        # Everything is checked before anything is applied: a refused state leaves the loader as it was.
        _state.check(state, self._fingerprint())
        cursors = _cursor.from_json(state["rows"], self.batch_size, len(self.items))
        epoch = int(state["epoch"])
        lengths = self._item_lengths()
        try:
            batches: int | None = self.batches_in_epoch(epoch)
        except TypeError:  # lengths unknown
            batches = None
        skipped = _state.check_values(
            state, cursors, lengths=lengths, num_streams=len(self._streams(epoch)), batches=batches,
            segment=self.segment, restream=self.epoch_end == "restream", time_steps=self.time_steps,
        )  # fmt: skip
        try:
            resume = json.loads(json.dumps(dict(state)))
        except (TypeError, ValueError) as exc:
            raise StateError(f"the state is not plain JSON data: {exc}") from None
        self._resume = resume
        self._skipped += len(skipped)

    def _for_this_rank(self, state: Mapping[str, Any]) -> Mapping[str, Any]:
        """A state saved by another rank of the same run becomes this rank's state at the same epoch and batch.

        Frameworks that checkpoint on rank 0 alone (Lightning) hand every rank rank 0's loader state. Every rank
        yields the same number of batches, and a rank's position at a batch follows from the streams' lengths
        alone (``scheduled.seek``), so no rank needs another's. Items skipped on the saving rank are not known here:
        such a state is refused."""
        fp = state.get("fingerprint") if isinstance(state, Mapping) else None
        if self.world_size == 1 or not isinstance(fp, Mapping) or fp.get("world_size") != self.world_size:
            return state
        if fp.get("rank") == self.rank or not isinstance(fp.get("rank"), int):
            return state
        _state.check({**state, "fingerprint": {**fp, "rank": self.rank}}, self._fingerprint())  # all else the same
        if state["skipped"]:
            raise StateError(
                f"the state was saved on rank {fp['rank']} after it skipped items, which rank {self.rank} cannot "
                "know; save every rank's own state_dict() and load each on its rank"
            )
        lengths = self._item_lengths()
        if any(n is None for n in lengths):
            raise StateError(
                f"the state was saved on rank {fp['rank']}; taking it on rank {self.rank} needs every stream's "
                "length; save every rank's own state_dict() and load each on its rank"
            )
        epoch = int(state["epoch"])
        batches = sum(self.batches_in_epoch(e) for e in range(epoch)) + int(state["batch"])
        return state_after(type(self), [int(n) for n in lengths if n is not None], batches, self._fingerprint(),
                           order=self._all_streams.order, **self.config.content())  # fmt: skip

    def _fingerprint(self) -> dict[str, Any]:
        if self._fingerprint_cache is None:
            self._fingerprint_cache = _state.fingerprint(
                source=self.plugin, fields=self.fields, items=self.items, config=self.config.content(),
                lengths=self._item_lengths(),
            )  # fmt: skip
        return self._fingerprint_cache

    def _wait_done(self, k: int) -> None:
        if self._local is not None:
            try:
                if self._filler is not None and self._filler.is_planned():
                    self._filler.fill_until(k)
                else:
                    fill(self._local, k)
            except Aborted:  # pragma: no cover - only a newer epoch changes the generation
                raise RuntimeError("this iterator was superseded by a newer iter(loader)") from None
            self._sample_busy()
            return
        assert self._pool is not None
        ahead = self._ahead
        self._waited = self._pool.wait_batch(k, self.timeout, ahead.stopping if ahead is not None else None)
        self._sample_busy()

    def _hand_out(self) -> None:
        """Give producers every free slot, up to ``prefetch`` batches ahead of the one being prepared. Also called
        by the ``Ahead`` thread while its queue is full, so producers never wait for the consumer to take one.

        In-process nothing runs ahead: only the batch being made is handed out, into the slot freed last (free
        slots are a stack, ``Slots``), which is still in the CPU's caches. Cycling through all the slots instead
        cost 4-8 % of the in-process rate with 1.5 MB batches (workloads A8 and A8b of ``bench_loader.py``)."""
        ahead = self.window if self._pool is not None else 1
        self._k_next = self._slots.hand_out(self.ring.control, self._k_next, self._k + ahead)

    def _back_slots(self, n: int) -> bool:
        """Back the ring's slots up to ``n`` with memory, and let batches use them; False if shared memory has no
        room for them now. Called before the first batch (pin_memory)."""
        if not self.ring.reserve(n):  # the ring knows what is backed already
            return False
        self._slots.grow(self.ring.reserved)
        return True

    def _stop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.stop()

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a pool call; on any failure the loader closes, so nothing outlives the error."""
        try:
            fn(*args)
        except BaseException:
            self.close()
            raise

    def _assemble(self, torch: Any, slot: int, epoch: int, k: int) -> Batch:
        # Zero-copy unless the consumer is holding so many batches that producers would run out of slots.
        pin_copy = bool(self._pin) and not self._pinned_ring
        copy = pin_copy or self._slots.crowded()
        holder = self.ring.holder(slot)
        arrays = self.ring.holder_views(holder, self._names)  # the fields, then the flags (``FLAGS`` order)
        from_numpy = torch.from_numpy
        if copy:
            tensors = [from_numpy(a.copy()) for a in arrays]
            del arrays, holder
            self._slots.give_back(slot)
            self._copies += not pin_copy
        else:
            self._slots.lend(holder, slot)
            tensors = [from_numpy(a) for a in arrays]
            del arrays, holder
        if pin_copy:
            tensors = [t.pin_memory() for t in tensors]
        n = len(self.fields)
        flags = dict(zip(FLAGS, tensors[n:], strict=True))
        first = flags["is_first"]
        reset = first[0] if self.layout == "TB" else first[:, 0]
        lookup = self._source_lookup
        source = None if lookup is None else from_numpy(lookup.take(flags["stream"].numpy()))
        return Batch(data=dict(zip(self._names[:n], tensors[:n], strict=True)), reset=reset, epoch=epoch, index=k,
                     layout=self.layout, source=source, **flags)  # fmt: skip

    # ------------------------------------------------------------------------------------ information
    def __len__(self) -> int:
        """Batches in the next epoch (the current one while iterating).

        With ``batches_per_epoch`` it is that number. Otherwise it needs every item's length and can vary from
        epoch to epoch with the shuffle (with several ranks it is the same on every rank).
        """
        return self.batches_in_epoch(self._next_epoch())

    @property
    def window(self) -> int:
        """Batches the workers may write ahead of the consumer: ``prefetch``."""
        return self.prefetch

    def batches_in_epoch(self, epoch: int) -> int:
        """The batches epoch ``epoch`` yields, from the streams' lengths alone (see ``len()``)."""
        target = self._target(epoch)
        if target is not None:
            return target
        lengths = self._item_lengths()
        if any(n is None for n in lengths):
            raise TypeError(
                f"len() needs every stream's length, but source {self.plugin!r} does not report them all; pass "
                "batches_per_epoch=N to fix the epoch's length, or make the source report lengths (for video: "
                "scan=True)"
            )
        base = self._all_streams
        if base.lengths is None:
            base = all_streams(lengths, self.segment, base.order)
        s = epoch_streams(base, seed=self.seed, epoch=epoch, shuffle=self.shuffle)
        assert s.lengths is not None
        return count_batches(s.lengths.tolist(), self.batch_size, self.time_steps, self.boundary, self.epoch_end)

    def _next_epoch(self) -> int:
        """The epoch ``len()`` describes: a loaded state's, the current one while iterating, else the next."""
        if self._resume is not None:
            return int(self._resume["epoch"])
        return self._epoch if self._active else self._epoch + 1

    def _item_lengths(self) -> list[int | None]:
        if self._lengths is None:
            self._lengths = [self._length_of(i) for i in range(len(self.items))]
        return self._lengths

    def _length_of(self, stream: int) -> int | None:
        """``source.length()`` of item ``stream``; what it raises is a ``SourceError`` naming the item, or under
        ``on_error="skip"`` an unknown length (the item's open fails then, and it is skipped as usual)."""
        item = self.items[stream]
        try:
            n = self.source.length(item)
            return None if n is None else int(n)
        except (Exception, SystemExit) as exc:
            name = item_name(self.source, item)
            if self.on_error == "skip":
                log.warning("length() of item %r (stream %d) failed: %s: %s", name, stream, type(exc).__name__, exc)
                return None
            raise SourceError(
                f"plugin {self.plugin!r} failed measuring item {name!r} (stream {stream}): {type(exc).__name__}: {exc}"
            ) from exc

    def _streams(self, epoch: int) -> Streams:
        """This rank's streams of ``epoch`` in ticket order (see ``scheduled.streams``)."""
        return epoch_streams(self._all_streams, seed=self.seed, epoch=epoch, shuffle=self.shuffle, rank=self.rank,
                             world_size=self.world_size)  # fmt: skip

    def _target(self, epoch: int) -> int | None:
        """The batches every epoch must yield: fixed by the user, or equal on every rank; None: natural end."""
        if self.batches_per_epoch is not None:
            return self.batches_per_epoch
        if self.world_size == 1:
            return None
        counts = rank_batches(
            self._all_streams, seed=self.seed, epoch=epoch, shuffle=self.shuffle, world_size=self.world_size,
            batch_size=self.batch_size, time_steps=self.time_steps, boundary=self.boundary, epoch_end=self.epoch_end,
        )  # fmt: skip
        return min(counts) if self.epoch_end == "drop" else max(counts)

    @property
    def num_streams(self) -> int:
        return len(self.items)

    def stream_name(self, stream: int) -> str:
        """The source's name for item index ``stream`` (what ``batch.stream`` holds)."""
        return item_name(self.source, self.items[stream])

    def stream_length(self, stream: int) -> int | None:
        if self._lengths is not None:
            return self._lengths[stream]
        return self._length_of(stream)

    def _sample_busy(self) -> None:
        t = time.perf_counter()
        if not self._busy_hist or t - self._busy_hist[-1][0] > 0.1:
            self._busy_hist.append((t, self.ring.control.busy()))

    @property
    def stats(self) -> LoaderStats:
        hist = self._busy_hist
        busy: tuple[float, ...] = ()
        if len(hist) >= 2:
            recent = [h for h in hist if hist[-1][0] - h[0] <= 3.0] or list(hist)
            (t0, b0), (t1, b1) = (recent[0] if len(recent) > 1 else hist[-2]), hist[-1]
            busy = tuple(float(x) for x in np.clip((b1 - b0) / max(t1 - t0, 1e-9), 0.0, 1.0))
        elif not self._closed:
            busy = tuple(0.0 for _ in range(max(self.num_workers, 1)))
        steps = self.ring.control.steps() if not self._closed else ()
        elapsed = time.perf_counter() - self._t_first_next if self._t_first_next else 0.0
        ready = self._pool.ready_batches(self._k) if self._pool is not None and not self._closed else 0
        return LoaderStats(
            batches=self._batches, steps=self._steps, bytes=self._bytes, elapsed_s=elapsed,
            first_batch_s=self._first_batch_s, waits_s=tuple(self._waits), worker_busy=busy,
            worker_steps=steps, ready_slots=ready, num_slots=self._slots.num_slots,
            epoch=max(self._epoch, 0), streams_done=self._streams_done, streams_total=self._n_streams,
            skipped=self._skipped, copies=self._copies, steps_per_batch=self.batch_size * self.time_steps,
            length_mismatches=self._mismatches, batch_size=self.batch_size,
            worker_stream=tuple(self.ring.control.reading(w)[0] for w in range(len(self._bounds)))
            if not self._closed else (),
            rows_moved=self.ring.control.moved if not self._closed else 0,
            worker_busy_s=tuple(float(x) for x in self.ring.control.busy()) if not self._closed else (),
        )  # fmt: skip

    # ---------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent; also runs at garbage collection/exit."""
        if self._closed:
            return
        self._closed = True
        self._stop_ahead()
        if self._local is not None:
            close_rows(self._local.rows.values())
        if self._filler is not None:
            self._filler.close()
        self._finalizer()

    def __enter__(self) -> StreamLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"StreamLoader({self.plugin}, streams={len(self.items)}, B={self.batch_size}, "
            f"T={self.time_steps}, workers={self.num_workers}, boundary={self.boundary!r}, "
            f"epoch_end={self.epoch_end!r}, layout={self.layout!r})"
        )
