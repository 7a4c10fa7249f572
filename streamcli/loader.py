"""Where a batch is consumed: ``StreamLoader``, the façade over the parts.

It holds a source's declared fields and items (``declared``) and epochs (``scheduled.streams``), the shared-memory
ring that carries its batches (``shared.ring``), the producers that fill them (``workers.producers``: in-process or
worker processes), the hand-out of each batch to the consumer (``handout``) and the epochs' run (``iteration``),
and keeps what ``state_dict`` saves (``scheduled.resume``); ``wiring`` builds and joins them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streamcli.batch import Batch
from streamcli.caller import user_stacklevel
from streamcli.config import DEFAULT_START_METHOD, LoaderConfig
from streamcli.errors import LoaderClosedError
from streamcli.source import StreamSource, call_default_segment, check_source, has_costly_steps, item_name
from streamcli.stats import LoaderStats
from streamcli.wiring import build
from streamcli.workers.pool import WorkerPool


class StreamLoader:
    """Temporally coherent batches from many streams of one source.

    A source with ``block_steps = True`` yields blocks (field -> array of ``n`` steps) instead of steps; the
    loader splits them across batches (``supports_blocks`` says this loader can).

    Args:
        source: a ``StreamSource`` (see ``streamcli.source``), e.g. ``load_source("text", "samples/text")``.
        batch_size: B, the number of rows; each row carries one stream at a time.
        time_steps: T, the steps per row per batch.
        num_workers: producer processes; 0 runs in-process (how workers share the rows: ``balance``).
        seed: the stream order of epoch ``e`` is ``default_rng([seed, e]).permutation`` of the streams; it also
            seeds ``ctx.seed`` of a transform.
        shuffle: False keeps the order of ``source.items()`` in every epoch.
        boundary: "pad" (after a stream ends the rest of its row is padding; the next starts at the next
            batch) or "pack" (the next stream starts at the very next step).
        epoch_end: "pad" (every step of every stream exactly once; idle rows are padding), "restream"
            (idle rows replay streams, flagged in ``batch.replayed``) or "drop" (stop when a row runs dry).
        layout: "TB" for (T, B, ...) tensors, "BT" for (B, T, ...).
        on_error: "raise" (a source exception stops the epoch with a ``SourceError``) or "skip" (the item
            ends where it failed, is logged on the ``streamcli`` logger and counted in ``stats.skipped``).
        pin_memory: copy batches into page-locked memory when CUDA is present (warns once otherwise).
        prefetch: batches the workers may write ahead of the consumer. By default (None) as many as fit in
            the CPU's last-level cache and in a quarter of the free shared memory, from 4 to 16 (a ring that
            fits in the cache keeps the workers' copies out of main memory). In-process (4 by default) it only
            sets how many batches the consumer may keep before later ones are copies.
        timeout: seconds without progress before a ``WorkerError`` (None: wait as long as workers live, with one
            ``RuntimeWarning`` naming the worker, the item and the source's call after ``workers.pool.STALL_WARN_S``
            = 30 s, ``$STREAMCLI_STALL_WARN_S``), counted once every worker has started; a worker's start (imports,
            ``setup_worker``) may take up to ``max(timeout, 120)`` s. Needs ``num_workers >= 1``: in-process a hung
            source cannot be stopped safely, so the pair is refused.
        mp_context: the multiprocessing start method of the workers: "forkserver" (the default on Linux: every
            worker is a fork of one clean server process that imported streamcli and your main module once),
            "spawn" (the default elsewhere: each worker imports them afresh) or "fork" (forks whatever threads
            and CUDA state the parent holds). Under the first two your main module is imported again without
            running its ``if __name__ == "__main__":`` block, hence that guard. The source and the transform are
            pickled to the workers with any of them.
        segment: cut every item into streams of at most this many steps (0: whole items). Each segment is a
            stream of its own (its own ticket, ``is_first`` at its first step; ``batch.position`` stays the
            step's index in the item), opened with ``open(item, start=k*segment)``. Items of unknown length
            are cut too: the next segment starts on the same row once the item is seen to go on.
        batches_per_epoch: yield exactly this many batches every epoch, cutting the epoch or continuing it
            with padding (replays under ``epoch_end="restream"``); ``len()`` is then this number.
        rank: this process's index among ``world_size`` processes (DDP) sharing one global batch of
            ``world_size * batch_size`` rows planned alike from the lengths: it holds rows ``[rank * B, (rank+1) * B)``
            (the same global batches on any world size); by default from the ``torch.distributed`` process group,
            else ``RANK``, else 0. Without lengths (``batches_per_epoch``) each rank deals itself a share of streams.
        world_size: the number of such processes; by default from the process group, else ``WORLD_SIZE``,
            else 1.
        balance: with workers, give a row's next stream to whichever worker is free, and move a row to an idle
            worker when the others hold up the batch (a reopen at its position): for steps that cost far more
            than their copy, and unevenly (decoding video). False keeps a fixed block of rows per worker, the
            cheaper way when rows cost alike. By default (None) from the start if the source says its steps are
            costly (``costly_steps``, see ``streamcli.source.BaseSource``), else once the workers are measured
            to read costly steps unevenly (``streamcli.iteration``): the epoch then goes on balanced from the
            batch you are at. Batches are the same either way. Sources of unknown length balance unless told not to.
            On several ranks (``world_size > 1``) each worker keeps a fixed block of its rank's rows: an explicit
            ``balance=True`` there warns once (``RuntimeWarning``) and has no effect.
        transform: ``transform(block, ctx) -> block``, or a spelling such as ``"crop=112,flip"``, run by the
            producers on each block of steps as it is read (``streamcli.transforms``); ``ctx.seed`` is fixed per
            stream and epoch, so a draw from it is the same on every step of a stream. Its optional
            ``fields(fields)`` member gives the batch's fields.
        index: the path or URL of an index (``streamcli index``) to take the items and their lengths from, so
            start-up calls neither ``items()`` nor ``length()``; refused (``StaleIndexError``) if it was written by
            another source or with other settings. By default the index the source found next to its data, if any.
        trace: write a Chrome / Perfetto trace of the producers and the consumer to this file when the loader
            closes (``streamcli.trace``: each producer's fills split into plan, open, read and write, the consumer's
            waits, stalls and row moves); open it at https://ui.perfetto.dev. Off (None) it costs nothing.

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
        self.source = check_source(source)
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
        parts = build(self, self.source, config, transform, index, trace)
        self.plugin, self.fields, self.items = parts.plugin, parts.fields, parts.items
        self.prefetch, self.epochs, self.fill_spec, self.ring = (
            parts.prefetch,
            parts.epochs,
            parts.fill_spec,
            parts.ring,
        )
        self._lengths, self._resume, self._finalizer = parts.lengths, parts.resume, parts.finalizer
        self._producers, self._handout, self._iteration = parts.producers, parts.handout, parts.iteration

    @property
    def _pool(self) -> WorkerPool | None:
        return self._producers.pool

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

    def _epoch_batches(self) -> Iterator[Batch]:
        yield from self._iteration.start()

    # ----------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """The position right after the last batch handed out, as plain JSON-serialisable data.

        Save it next to the model's checkpoint; ``load_state_dict`` on a loader with the same source and settings
        (any ``num_workers`` and rank) continues from there, bit-identically. Valid at any time: before the first batch,
        mid-epoch and between epochs.
        """
        return self._resume.state(self._iteration.position)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``): the next ``iter(loader)`` resumes that epoch at its next
        batch, reopening each row's stream at its position; the one after starts the following epoch.

        A state of another global batch (``world_size * batch_size``) re-plans its epoch's rest, every step once
        (``docs/training.md``, "Resizing a run"); the same global batch on any world size resumes exactly.
        Raises ``StateError`` (a ``ValueError``) naming what differs if the state comes from another source, item
        list or item lengths, time steps, seed, shuffle or mode, or from another streamcli version, and
        naming the field if a value cannot come from a real run (tampered with). A refused state changes nothing.
        """
        if self._iteration.closed:
            raise LoaderClosedError("this StreamLoader is closed; create a new one (or iterate inside its with block)")
        self._iteration.tally.skipped += self._resume.load(state)

    # ------------------------------------------------------------------------------------ information
    def __len__(self) -> int:
        """Batches in the next epoch (the current one while iterating).

        With ``batches_per_epoch`` it is that number. Otherwise it needs every item's length and can vary from
        epoch to epoch with the shuffle (with several ranks it is the same on every rank).
        """
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
