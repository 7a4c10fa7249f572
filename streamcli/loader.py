"""Where a batch is consumed: ``StreamLoader``, the façade over the parts.

It wires a source's epochs (``scheduled.epochs``), the shared-memory ring that carries its batches
(``lives.ring``), the producers that fill them (``workers.producers``: in-process or worker processes) and the
hand-out of each batch to the consumer (``handout``), and keeps the position that ``state_dict`` saves
(``scheduled.position``).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streamcli.batch import Batch
from streamcli.config import LoaderConfig
from streamcli.errors import SourceError
from streamcli.fills.checks import check_fields
from streamcli.fills.claimed.rows import epoch_rows
from streamcli.fills.spec import FillSpec, Skip
from streamcli.handout import AHEAD, Epoch, HandOut, Ready
from streamcli.lives.ring import Ring, default_prefetch
from streamcli.lives.tensors import import_torch, split_rows
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled import position as _position
from streamcli.scheduled import state as _state
from streamcli.scheduled.epochs import Epochs
from streamcli.scheduled.position import Position
from streamcli.scheduled.seek import state_after
from streamcli.source import (
    Field,
    StreamSource,
    call_default_segment,
    check_source,
    item_name,
    plugin_name,
    source_lookup,
    stream_order_of,
)
from streamcli.stats import LoaderStats
from streamcli.transforms import output_fields
from streamcli.transforms import resolve as resolve_transform
from streamcli.workers.pool import WorkerPool, shutdown
from streamcli.workers.producers import InProcess, Workers

log = logging.getLogger("streamcli")


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
        transform: ``transform(block, ctx) -> block``, or a spelling such as ``"crop=112,flip"``, run by the
            producers on each block of steps as it is read (``streamcli.transforms``); ``ctx.seed`` is fixed per
            stream and epoch, so a draw from it is the same on every step of a stream. Its optional
            ``fields(fields)`` member gives the batch's fields.

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
        transform: Callable[..., Any] | str | None = None,
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
        transform = resolve_transform(transform)  # a CLI spelling ("crop=112,flip") or a callable
        source_fields, fields = fields, fields if transform is None else output_fields(transform, fields)
        check_fields(fields)
        self.fields: tuple[Field, ...] = fields
        self.items: list[Any] = _calling(self.plugin, "listing its items", lambda: list(source.items()))
        self.epochs = Epochs(config, len(self.items), lambda: [self._length_of(i) for i in range(len(self.items))],
                             self.plugin, stream_order_of(source))  # fmt: skip
        self.plan = FillSpec(plugin=self.plugin, fields=fields, config=config, transform=transform,
                             source_fields=None if transform is None else source_fields)  # fmt: skip
        # Slots: ``prefetch`` being filled, plus the one the consumer holds, one being assembled and those
        # prepared ahead of it.
        extra = 2 + (AHEAD if num_workers else 0)
        if prefetch is None:
            prefetch = default_prefetch(fields, self.batch_size, self.time_steps, self.layout, num_workers, extra)
        self.prefetch = self.window = prefetch
        self.ring = Ring.create(
            dict(fields=fields, batch_size=self.batch_size, time_steps=self.time_steps, num_slots=prefetch + extra,
                 num_workers=max(num_workers, 1), num_streams=len(self.epochs.all), layout=self.layout),
        )  # fmt: skip
        self._finalizer = weakref.finalize(self, shutdown, None, self.ring)
        self._bounds = split_rows(batch_size, max(num_workers, 1))
        self._position = Position.start_of(0, batch_size)
        self._resume: dict[str, Any] | None = None  # a loaded state, used by the next iter()
        self._fingerprint_cache: dict[str, Any] | None = None
        self._epoch, self._gen, self._active, self._closed = -1, 0, False, False
        self._n_streams = len(self.epochs.all)  # this epoch's streams (this rank's share)
        # statistics
        self._t_created = time.perf_counter()
        self._t_first_next: float | None = None
        self._first_batch_s: float | None = None
        self._waits: deque[float] = deque(maxlen=1000)
        self._batches = self._steps = self._bytes = self._skipped = self._mismatches = self._streams_done = 0
        self._batch_bytes = sum(f.nbytes for f in fields) * batch_size * time_steps
        pending: dict[int, list[Skip]] = {}

        # A closure over data, not a bound method: the finalizer holds the pool, and must not hold self.
        def on_skip(skip: Skip) -> None:
            pending.setdefault(skip.batch, []).append(skip)

        producers: InProcess | Workers
        try:
            if num_workers:
                producers = Workers(self.plan, source, self.items, self.ring, self._bounds, mp_context, on_skip)
                self._finalizer.detach()
                self._finalizer = weakref.finalize(self, shutdown, producers.pool, self.ring)
            else:
                producers = InProcess(self.plan, source, self.items, self.ring, on_skip)
        except BaseException:
            self.close()
            raise
        self._producers = producers
        self._handout = HandOut(self.ring, fields, config, producers, prefetch, source_lookup(source))
        self._handout.pending = pending

    @property
    def _pool(self) -> WorkerPool | None:
        return self._producers.pool

    @property
    def _ahead(self) -> Any:
        return self._handout.ahead

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
        self._handout.stop_ahead()
        self._gen += 1
        resume, self._resume = self._resume, None
        if resume is None:
            self._epoch += 1
            self._position = Position.start_of(self._epoch, self.batch_size)
        else:
            self._position = Position.of_state(resume, self.batch_size, len(self.items))
            self._epoch = self._position.epoch
        return self._run(self._gen, self._epoch)

    def _begin_epoch(self, gen: int, epoch: int) -> Epoch:
        """Stop whatever producers were doing, then set the shared tables for the epoch from the position (fresh,
        or a resumed state's)."""
        pos, control = self._position, self.ring.control
        control.stage(pos.cursors, pos.batch, epoch)
        control.set_generation(gen)  # producers of an older generation abandon their batch
        self._handout.pending.clear()
        try:
            self._producers.start_epoch(gen, self.timeout)
        except BaseException:
            self.close()  # nothing outlives the error
            raise
        # Only now: a producer of the old generation may still have been taking a ticket until it acknowledged.
        streams = self.epochs.streams(epoch)
        self._n_streams = len(streams)
        control.set_streams(streams.table(self.epochs.lengths()), pos.tickets)
        control.set_rows(*epoch_rows(pos.cursors, pos.batch, self.time_steps, self._bounds))
        self._producers.begin(gen)
        control.open_epoch(gen, pos.batch)
        self._handout.slots.new_epoch()  # only now: no producer writes the old epoch's slots any more
        state, flags = pos.cursors[:, _cursor.STATE], pos.cursors[:, _cursor.FLAGS]
        n_live = int((((state == _cursor.LIVE) | (state == _cursor.FOLLOW)) & (flags & _cursor.REPLAYED == 0)).sum())
        self._streams_done = max(0, min(pos.tickets, self._n_streams) - n_live)
        # Under "drop" a dry row means the epoch already ended; with a fixed length it goes on as padding.
        dropped = self.epoch_end == "drop" and bool((state == _cursor.DRY).any())
        return Epoch(epoch, pos.batch, pos.tickets, self._n_streams, self.epochs.target(epoch), dropped)

    def _run(self, gen: int, epoch: int) -> Iterator[Batch]:
        torch = import_torch()
        self._handout.pin_ring(torch)
        plan = self._begin_epoch(gen, epoch)
        self._active = True
        try:
            yield from self._batches_of(torch, gen, plan)
            if gen == self._gen:  # the epoch ran to its end: the next iter() starts the next one
                self._position = Position.start_of(epoch + 1, self.batch_size)
        finally:
            if gen == self._gen:
                self._active = False

    def _batches_of(self, torch: Any, gen: int, epoch: Epoch) -> Iterator[Batch]:
        """Hand the prepared batches to the consumer, moving the position past each."""
        handout = self._handout
        ready = handout.ready(torch, epoch, lambda: not self._closed and gen == self._gen)
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
                if rec is None or rec.dropped:  # "drop": the epoch ended before this batch
                    return
                self._hand(rec, epoch.number)
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
            if handout.ahead is not None and ready is handout.ahead and handout.ahead.failed:
                self.close()  # a failure in the workers: nothing outlives it
            raise
        finally:
            if handout.ahead is not None and ready is handout.ahead:
                handout.stop_ahead()

    def _hand(self, rec: Ready, epoch: int) -> None:
        """Move the loader's position (``state_dict``) past batch ``rec``, and report its skipped items."""
        skipped = self._position.skipped
        for skip in rec.skips:
            if skip.kind == "length":
                self._mismatches += 1
                if self._mismatches == 1:
                    # stacklevel: past _hand, _batches_of, _run and _epoch_batches, to the consumer's loop
                    warnings.warn(f"{skip.error}; len(loader) may be wrong (counted in stats.length_mismatches)",
                                  RuntimeWarning, stacklevel=5)  # fmt: skip
                continue
            self._skipped += 1
            skipped.append([skip.item, skip.step])
            log.warning("skipped item %r (stream %d) at step %d: %s", skip.name, skip.item, skip.step,
                        skip.error)  # fmt: skip
        self._streams_done = max(0, min(rec.tickets, self._n_streams) - rec.n_live)
        if rec.last:
            self._position = Position.start_of(epoch + 1, self.batch_size)
        else:
            assert rec.cursors is not None
            self._position = Position(epoch, rec.k + 1, rec.tickets, rec.cursors, skipped)

    # ----------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """The position right after the last batch handed out, as plain JSON-serialisable data.

        Save it next to the model's checkpoint; ``load_state_dict`` on a loader with the same source and settings
        (any ``num_workers``) continues from there, bit-identically. Valid at any time: before the first batch,
        mid-epoch and between epochs.
        """
        if self._resume is not None:
            return dict(json.loads(json.dumps(self._resume)))
        return self._position.to_state(self._fingerprint())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``): the next ``iter(loader)`` resumes that epoch at its next
        batch, reopening each row's stream at its position; the one after starts the following epoch.

        Raises ``StateError`` (a ``ValueError``) naming what differs if the state comes from another source, item
        list or item lengths, batch size, time steps, seed, shuffle or mode, or from another streamcli version, and
        naming the field if a value cannot come from a real run (tampered with). A refused state changes nothing.
        """
        if self._closed:
            raise RuntimeError("this StreamLoader is closed; create a new one")
        state = _position.for_this_rank(state, fingerprint=self._fingerprint(), epochs=self.epochs,
                                        seek=self._seek)  # fmt: skip
        self._resume, skipped = _position.checked(state, fingerprint=self._fingerprint(), epochs=self.epochs,
                                                  batch_size=self.batch_size, num_items=len(self.items))  # fmt: skip
        self._skipped += skipped

    def _seek(self, lengths: list[int], batches: int) -> dict[str, Any]:
        return state_after(type(self), lengths, batches, self._fingerprint(), order=self.epochs.all.order,
                           **self.config.content())  # fmt: skip

    def _fingerprint(self) -> dict[str, Any]:
        if self._fingerprint_cache is None:
            self._fingerprint_cache = _state.fingerprint(
                source=self.plugin, fields=self.fields, items=self.items, config=self.config.content(),
                lengths=self.epochs.lengths(),
            )  # fmt: skip
        return self._fingerprint_cache

    # ------------------------------------------------------------------------------------ information
    def __len__(self) -> int:
        """Batches in the next epoch (the current one while iterating).

        With ``batches_per_epoch`` it is that number. Otherwise it needs every item's length and can vary from
        epoch to epoch with the shuffle (with several ranks it is the same on every rank).
        """
        if self._resume is not None:
            epoch = int(self._resume["epoch"])  # a loaded state's
        else:
            epoch = self._epoch if self._active else self._epoch + 1
        return self.batches_in_epoch(epoch)

    def batches_in_epoch(self, epoch: int) -> int:
        """The batches epoch ``epoch`` yields, from the streams' lengths alone (see ``len()``)."""
        return self.epochs.batches(epoch)

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

    @property
    def num_streams(self) -> int:
        return len(self.items)

    def stream_name(self, stream: int) -> str:
        """The source's name for item index ``stream`` (what ``batch.stream`` holds)."""
        return item_name(self.source, self.items[stream])

    def stream_length(self, stream: int) -> int | None:
        return self.epochs.lengths()[stream] if self.epochs.measured else self._length_of(stream)

    @property
    def stats(self) -> LoaderStats:
        control, closed, handout = self.ring.control, self._closed, self._handout
        elapsed = time.perf_counter() - self._t_first_next if self._t_first_next else 0.0
        return LoaderStats(
            batches=self._batches, steps=self._steps, bytes=self._bytes, elapsed_s=elapsed,
            first_batch_s=self._first_batch_s, waits_s=tuple(self._waits),
            worker_busy=handout.busy_shares(closed, self.num_workers), worker_steps=() if closed else control.steps(),
            ready_slots=0 if closed else self._producers.ready_batches(handout.k),
            num_slots=handout.slots.num_slots, epoch=max(self._epoch, 0), streams_done=self._streams_done,
            streams_total=self._n_streams, skipped=self._skipped, copies=handout.copies,
            steps_per_batch=self.batch_size * self.time_steps, length_mismatches=self._mismatches,
            batch_size=self.batch_size,
            worker_stream=() if closed else tuple(control.reading(w)[0] for w in range(len(self._bounds))),
            rows_moved=0 if closed else control.moved,
            worker_busy_s=() if closed else tuple(float(x) for x in control.busy()),
        )  # fmt: skip

    # ---------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent; also runs at garbage collection/exit."""
        if self._closed:
            return
        self._closed = True
        handout = getattr(self, "_handout", None)
        if handout is not None:
            handout.stop_ahead()
        producers = getattr(self, "_producers", None)
        if producers is not None:
            producers.close()
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
