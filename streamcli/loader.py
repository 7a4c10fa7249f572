"""``StreamLoader``: the façade a training loop holds, and the one place that builds the parts it holds, in order:
the declared fields and items (``declared``), their lengths and epochs (``scheduled.streams``), the shared-memory ring
(``shared.ring``), the producers that fill it (``workers.producers``), the hand-out to the consumer (``handout``)
and the epochs' run (``iteration``); what ``state_dict`` saves is ``scheduled.resume``'s."""

from __future__ import annotations

import os
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streamcli.batch import Batch
from streamcli.caller import user_stacklevel
from streamcli.config import DEFAULT_START_METHOD, LoaderConfig
from streamcli.declared import Declared
from streamcli.errors import LoaderClosedError
from streamcli.fills.spec import FillSpec, Skip
from streamcli.handout import READY_DEPTH, HandOut
from streamcli.index import for_loader
from streamcli.iteration import Iteration
from streamcli.lengths import Lengths
from streamcli.scheduled.resume import Resume
from streamcli.scheduled.streams import Epochs
from streamcli.shared.ring import Ring
from streamcli.shared.sizing import loader_ring
from streamcli.shared.tensors import import_torch, split_rows
from streamcli.source import (
    StreamSource,
    call_default_segment,
    check_source,
    has_costly_steps,
    has_window,
    item_name,
    source_lookup,
    stream_order_of,
)
from streamcli.stats import LoaderStats, Tally
from streamcli.trace import Tracer
from streamcli.workers.pool import shutdown
from streamcli.workers.producers import InProcess, Workers


class StreamLoader:
    """Temporally coherent batches from many streams of one source: row ``b`` of each (T, B, ...) batch continues
    the stream it held in the batch before (``docs/concepts.md``).

    Args:
        source: a ``StreamSource`` (``streamcli.source``), e.g. ``load_source("text", "samples/text")``; one with
            ``block_steps = True`` yields blocks of ``n`` steps, split across batches.
        batch_size: B, the rows; each carries one stream at a time.
        time_steps: T, the steps per row per batch.
        num_workers: producer processes; 0 reads in the main process.
        seed: epoch ``e`` orders the streams by ``default_rng([seed, e]).permutation``; it also seeds a transform's
            ``ctx.seed``.
        shuffle: False keeps the order of ``source.items()`` in every epoch.
        boundary: "pad" (the rest of a row after its stream ends is padding; the next starts at the next batch) or
            "pack" (the next starts at the very next step).
        epoch_end: "pad" (every step of every stream exactly once; idle rows pad), "restream" (idle rows replay
            streams, flagged in ``batch.replayed``) or "drop" (stop when a row runs dry).
        layout: "TB" for (T, B, ...) tensors, "BT" for (B, T, ...).
        on_error: "raise" (a source's exception stops the epoch: ``SourceError``) or "skip" (the item ends where it
            failed, logged on the ``streamcli`` logger and counted in ``stats.skipped``).
        pin_memory: copy batches into page-locked memory when CUDA is present (warns once otherwise).
        prefetch: batches written ahead of the consumer; None: as many as fit the CPU's last-level cache and a
            quarter of the free shared memory, 4 to 16 (in-process 4: the batches you may keep before later ones
            are copies).
        timeout: seconds without progress before a ``WorkerError`` (a worker's start may take ``max(timeout,
            120)``); None waits while workers live, warning once after 30 s (``$STREAMCLI_STALL_WARN_S``). Needs
            ``num_workers >= 1``: a hung source cannot be stopped in-process.
        mp_context: how workers start: "forkserver" (the default on Linux), "spawn" (elsewhere) or "fork". The first
            two import your main module again without its ``if __name__ == "__main__":`` block; the source and the
            transform are pickled to the workers.
        segment: cut every item into streams of at most this many steps (0: whole items), each its own ticket and
            ``is_first``, opened with ``open(item, start=k*segment)``; ``batch.position`` stays the item's step.
        batches_per_epoch: exactly this many batches every epoch (cut, or continued with padding); ``len()``.
        rank: this process's index among ``world_size`` (DDP) sharing one global batch of ``world_size *
            batch_size`` rows: it holds rows ``[rank * B, (rank+1) * B)``. By default from ``torch.distributed``,
            else ``RANK``, else 0.
        world_size: by default from the process group, else ``WORLD_SIZE``, else 1.
        balance: with workers, give a row's next stream to a free worker and move a row to an idle one (reopened at
            its position), for costly, uneven steps (video); False keeps a fixed block of rows per worker. None:
            on if the source says ``costly_steps``, for unknown lengths, or once workers are measured uneven. No
            effect (a warning) when ``world_size > 1``. Batches are the same either way.
        transform: ``transform(block, ctx) -> block``, or a spelling such as ``"crop=112,flip"``
            (``streamcli.transforms``), run by the producers on each block read; ``ctx.seed`` is fixed per stream
            and epoch. Its optional ``fields(fields)`` member gives the batch's fields.
        index: an index (``streamcli index``) to take the items and lengths from instead of ``items()`` and
            ``length()``; refused (``StaleIndexError``) if written by another source or settings. By default the
            one the source finds beside its data.
        trace: write a Perfetto trace of the producers and the consumer to this file at close
            (``docs/inspect.md``).

    Batches for the same source, seed, sizes and modes are bit-identical for every ``num_workers``.
    Iterating again starts the next epoch. Use it as a context manager, or call ``close()``.
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
        mp_context: str = DEFAULT_START_METHOD,
        segment: int = 0,
        batches_per_epoch: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        transform: Callable[..., Any] | str | None = None,
        balance: bool | None = None,
        index: str | os.PathLike[str] | None = None,
        trace: str | os.PathLike[str] | None = None,
    ) -> None:
        source = self.source = check_source(source)
        segment = segment or call_default_segment(source)  # e.g. the video source's own segment=N
        config = LoaderConfig(
            batch_size,
            time_steps,
            num_workers=num_workers,
            seed=seed,
            shuffle=shuffle,
            boundary=boundary,
            epoch_end=epoch_end,
            layout=layout,
            on_error=on_error,
            pin_memory=pin_memory,
            prefetch=prefetch,
            timeout=timeout,
            mp_context=mp_context,
            segment=segment,
            batches_per_epoch=batches_per_epoch,
            rank=rank,
            world_size=world_size,
            balance=True if balance is None and has_costly_steps(source) else balance,
        )
        self.config = config
        # Plain attributes for reading; the configuration itself is ``self.config`` (frozen).
        self.batch_size, self.time_steps, self.num_workers = config.batch_size, config.time_steps, config.num_workers
        self.seed, self.shuffle, self.layout = config.seed, config.shuffle, config.layout
        self.boundary, self.epoch_end, self.on_error = config.boundary, config.epoch_end, config.on_error
        self.pin_memory, self.timeout = config.pin_memory, config.timeout
        self.segment, self.batches_per_epoch = config.segment, config.batches_per_epoch
        assert config.rank is not None and config.world_size is not None
        self.rank, self.world_size = config.rank, config.world_size
        if balance is True and config.world_size > 1:
            warnings.warn(
                f"balance=True has no effect with world_size={config.world_size}: each worker keeps a fixed block of "
                "this rank's rows; leave balance unset (or False) on several ranks",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        # An index (``streamcli index``) holds the items and lengths: then no listing and no length() here.
        found = for_loader(source, index)
        declared = Declared.read(source, transform, None if found is None else found.items)
        self.plugin, self.fields, self.items = declared.plugin, declared.fields, declared.items
        indexed = None if found is None else found.length_list()
        self._lengths = Lengths(source, self.plugin, self.items, config.on_error, indexed)
        # Slots: ``prefetch`` being filled, plus the one the consumer holds, one being assembled and those prepared
        # ahead of it. A ring too large for this machine is refused here, before torch's import, the items' lengths
        # and any memory or process.
        extra = 2 + (READY_DEPTH if config.num_workers else 0)
        self.prefetch, ring_args = loader_ring(self.fields, config, config.prefetch, extra, len(self.items))
        import_torch()  # before any process or segment, so a signal during it finds nothing to clean up
        self.epochs = Epochs(config, len(self.items), self._lengths.all, self.plugin, stream_order_of(source))
        fill_spec = FillSpec(
            self.plugin,
            self.fields,
            config,
            transform=declared.transform,
            source_fields=None if declared.transform is None else declared.source_fields,
            trace=None if trace is None else os.fspath(trace),
            stamps=None if found is None else found.stamps,
        )
        tracer = None if trace is None else Tracer(trace, "consumer")
        if tracer is not None:
            tracer.clear_parts()
        self.ring = ring = Ring.create({**ring_args, "num_streams": len(self.epochs.all)})
        finalizer = weakref.finalize(self, shutdown, None, ring)  # frees the ring when the loader is collected
        bounds = split_rows(config.batch_size, max(config.num_workers, 1))
        self._resume = resume = Resume(
            plugin=self.plugin, fields=self.fields, items=self.items, config=config, epochs=self.epochs
        )
        pending: dict[int, list[Skip]] = {}

        # A closure over data, not a bound method: the finalizer holds the pool, and must not hold the loader.
        def on_skip(skip: Skip) -> None:
            pending.setdefault(skip.batch, []).append(skip)

        producers: InProcess | Workers
        try:
            if config.num_workers:
                producers = Workers(fill_spec, source, self.items, ring, bounds, config.mp_context, on_skip)
                finalizer.detach()
                finalizer = weakref.finalize(self, shutdown, producers.pool, ring)
            else:
                producers = InProcess(fill_spec, source, self.items, ring, on_skip, tracer)
        except BaseException:
            finalizer()  # nothing outlives the error
            raise
        self._pool = producers.pool  # (tests read it)
        self._handout = handout = HandOut(ring, self.fields, config, producers, self.prefetch, source_lookup(source))
        handout.pending = pending
        # Whether a measure may turn balance on: iterator streams (a random-access source's batches are shared whole)
        # with workers to share them, and balance left to the loader.
        adaptive = config.balance is None and config.num_workers >= 2 and not has_window(source)
        tally = Tally(sum(f.nbytes for f in self.fields) * config.batch_size * config.time_steps)
        run = Iteration(
            config, self.epochs, ring, handout, producers, bounds, resume, tally, finalizer, adaptive=adaptive
        )
        self._iteration, handout.tracer, run.tracer = run, tracer, tracer

    @property
    def _ready_queue(self) -> Any:
        return self._handout.ready_queue

    # -------------------------------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[Batch]:
        """The next epoch's batches (or a loaded state's). The epoch starts at the iterator's first ``next()``, not
        here: an iterator that is made and dropped unused (Lightning makes one to check the loader) takes no epoch,
        no loaded state and no position, and an older iterator is superseded only once a newer one starts."""
        if self._iteration.closed:
            raise LoaderClosedError("this StreamLoader is closed; create a new one (or iterate inside its with block)")
        return self._epoch_batches()

    def _epoch_batches(self) -> Iterator[Batch]:  # a generator: the epoch starts at its first ``next()``
        yield from self._iteration.start()

    # ----------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """The position right after the last batch handed out, as JSON-serialisable data, valid at any time: with
        ``load_state_dict`` a loader of the same source and settings (any ``num_workers`` and rank) goes on from there
        bit-identically."""
        return self._resume.state(self._iteration.position)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state_dict()``'s ``state``: the next ``iter(loader)`` resumes its epoch at the next batch,
        reopening each row's stream at its position. Another global batch (``world_size * batch_size``) re-plans the
        epoch's rest, every step once (``docs/training.md``, "Resizing a run"). A state of another source, items,
        lengths, settings or version, or tampered with, is refused (``StateError`` naming it) and changes nothing."""
        if self._iteration.closed:
            raise LoaderClosedError("this StreamLoader is closed; create a new one (or iterate inside its with block)")
        self._iteration.tally.skipped += self._resume.load(state)

    # ------------------------------------------------------------------------------------ information
    def __len__(self) -> int:
        """Batches in the next epoch (the current one while iterating): ``batches_per_epoch``, else from every item's
        length (it can vary with the shuffle; it is the same on every rank)."""
        run = self._iteration
        if self._resume.loaded is not None:  # a loaded state's epoch, as its re-plan (another global batch) has it
            return self.epochs.batches(int(self._resume.loaded["epoch"]), self._resume.loaded_replan())
        epoch = run.epoch if run.active else run.epoch + 1
        return self.batches_in_epoch(epoch)

    def batches_in_epoch(self, epoch: int) -> int:
        """The batches epoch ``epoch`` yields, from the streams' lengths alone (see ``len()``)."""
        return self.epochs.batches(epoch)

    @property
    def num_streams(self) -> int:
        return len(self.items)

    def stream_name(self, stream: int) -> str:
        """The source's name for item index ``stream`` (what ``batch.stream`` holds)."""
        return item_name(self.source, self.items[stream])

    def stream_length(self, stream: int) -> int | None:
        return self.epochs.lengths()[stream] if self.epochs.measured else self._lengths.of(stream)

    @property
    def stats(self) -> LoaderStats:
        return self._iteration.stats()

    # ---------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent; also runs at garbage collection/exit."""
        self._iteration.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (or the ``with`` block ended): the loader gives no more batches."""
        return bool(self._iteration.closed)

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
