"""Exporting: batches written into an export at a folder or a URL, resumably and byte-identically.

``open_writer`` opens a ``ShardWriter`` at a folder or a URL; ``export`` writes any finite iterable of batches,
``export_loader`` a ``StreamLoader``'s epochs, resuming from the loader's state saved with the last kept shard;
``iter_limit`` caps a run of epochs at a number of batches.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from streamcli.shards.format import ShardInfo, batch_nbytes, manifest_fields
from streamcli.shards.writer import ShardWriter

if TYPE_CHECKING:
    from streamcli.batch import Batch

Progress = Callable[[int, int], None]
"""``progress(batches_written, bytes_written)``; called after each batch."""


def open_writer(
    out_dir: str | os.PathLike[str],
    header: Mapping[str, Any],
    *,
    mode: str = "new",
    post: Callable[[ShardInfo], None] | None = None,
    lock: Any = None,
) -> ShardWriter:
    """A ``ShardWriter`` for ``out_dir``: a local folder (``file://`` URLs too), or a URL served by fsspec
    (``UnsupportedURLError`` if fsspec cannot serve it)."""
    return ShardWriter(out_dir, header, mode=mode, post=post, lock=lock)


def export(
    batches: Iterable[Batch],
    out_dir: str | os.PathLike[str],
    header: Mapping[str, Any],
    *,
    mode: str = "new",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write ``batches`` (a finite iterable) to ``out_dir`` and return the manifest.

    With ``mode="resume"`` pass the same batches from the start: those already in complete shards are
    skipped (the loader is deterministic), so the result is byte-identical to an uninterrupted export.
    """
    with open_writer(out_dir, header, mode=mode) as writer:
        if writer.complete:
            return writer.read_manifest()
        nbytes = batch_nbytes(manifest_fields(header), header["batch_size"], header["time_steps"])
        for batch in batches:
            writer.write(batch)
            if progress is not None:
                progress(writer.seen, writer.seen * nbytes)
        return writer.close()


def iter_limit(epochs: Iterator[Iterable[Batch]], batches: int | None) -> Iterator[Batch]:
    """Chain the epochs and stop after ``batches`` (if given), or at the first epoch that yields nothing."""
    n = 0
    if batches is not None and batches <= 0:
        return
    for epoch in epochs:
        before = n
        for batch in epoch:
            yield batch
            n += 1
            if batches is not None and n >= batches:
                return  # before pulling (and decoding) one batch too many
        if n == before:
            return  # an empty epoch: the next ones would be empty too


def export_loader(
    loader: Any,
    out_dir: str | os.PathLike[str],
    header: Mapping[str, Any],
    *,
    epochs: int | None = 1,
    batches: int | None = None,
    mode: str = "new",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Export a ``StreamLoader``'s batches (``epochs`` epochs, or as many as ``batches`` needs when ``epochs`` is
    None) and return the manifest.

    Every complete shard's record holds the loader's state after its last batch, so ``mode="resume"`` loads the
    state of the last kept shard and continues from there: nothing before it is read again, and the files are
    byte-identical to an uninterrupted export. A mix's source names go into the header (``sources``), so the shards
    keep ``batch.source``.
    """
    from streamcli.mix import names_of

    names = names_of(getattr(loader, "source", None))
    if names and not header.get("sources"):
        header = {**header, "sources": list(names)}
    with open_writer(out_dir, header, mode=mode) as writer:
        if writer.complete:
            return writer.read_manifest()
        done = writer.skip
        state = writer.resume_states[-1] if writer.resume_states else None
        if done and state is not None:  # seek: continue right after the last complete shard
            loader.load_state_dict(state)
            writer.seeked()
            first_epoch = int(state["epoch"])
        else:
            done, first_epoch = 0, 0  # a fresh export, or records without states: rerun and skip
        left = None if batches is None else batches - done
        epoch_iters = itertools.repeat(None) if epochs is None else range(max(0, epochs - first_epoch))
        nbytes = batch_nbytes(manifest_fields(header), header["batch_size"], header["time_steps"])
        for batch in iter_limit((iter(loader) for _ in epoch_iters), left):
            writer.write(batch, state=loader.state_dict())
            del batch
            if progress is not None:
                progress(writer.seen, writer.seen * nbytes)
        return writer.close()
