"""``ShardWriter``: roll batches into shards on a background thread, resumably, at a folder or a URL.

The header goes to ``.partial.json`` at once; after each shard is in place the record of every completed shard is
saved there too, so ``mode="resume"`` keeps exactly the shards whose bytes match their record. Finishing writes
``index.json`` (the commit point) and then removes ``.partial.json``. Where the files go, and how each step is
made safe there, is the writer's ``place``: ``folder_writer.FolderPlace`` or ``remote_writer.RemotePlace``. The
library never prints: progress goes to a callback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.batch import FLAG_DTYPES
from streamcli.errors import ShardError, StorageError
from streamcli.shards.folder_writer import FolderPlace, shard_record
from streamcli.shards.format import MANIFEST, ShardInfo, shard_name
from streamcli.shards.remote_lock import RemoteLock
from streamcli.shards.remote_writer import RemotePlace
from streamcli.shards.runs import batch_runs
from streamcli.storage import urls

if TYPE_CHECKING:
    from streamcli.batch import Batch


def _batch_arrays(batch: Batch) -> dict[str, np.ndarray]:
    """One batch as numpy copies (copies, so the loader can recycle its shared slot at once), its flags as runs
    (``runs``: format 2)."""
    out = {f"data.{k}": np.array(v.numpy(), copy=True) for k, v in batch.data.items()}
    flags = {name: getattr(batch, name).numpy() for name in FLAG_DTYPES}
    if batch.source is not None:  # a mix's: kept where the header names the sources
        flags["source"] = batch.source.numpy()
    out["flag.reset"] = np.array(batch.reset.numpy(), dtype="|b1", copy=True)
    out |= batch_runs(flags, batch.layout)
    out["meta.epoch"] = np.array(batch.epoch, dtype="<i8")
    out["meta.index"] = np.array(batch.index, dtype="<i8")
    return out


class ShardWriter:
    """Collect batches and roll them into shards of ``header["batches_per_shard"]`` batches.

    Args:
        out_dir: the export folder (created if missing), or its URL (``s3://bucket/run``: through fsspec).
        header: from ``make_header``; saved to ``.partial.json`` at once and into ``index.json`` at the end.
        mode: ``"new"`` refuses a non-empty folder, ``"overwrite"`` deletes a previous export in it,
            ``"resume"`` keeps the complete shards of an interrupted export with the same header.
        post: called with each shard's ``ShardInfo`` once it is on disk.
        lock: the folder's lock, if the caller holds it (a Ray export's driver); else the writer takes it and
            holds it until ``close`` or the end of its ``with`` block. A second export into the folder raises
            ``ExportBusyError`` naming this one.

    After construction, ``skip`` is the number of batches already in complete shards (resume): feed the
    writer the same batch sequence from the start and it drops that many before writing.
    ``resume_states`` holds the ``state`` given with the last batch of each kept shard, in order.
    ``complete`` is True when resuming an export that had already finished (nothing to write).
    ``place`` is where the files go: a ``FolderPlace``, or a ``RemotePlace`` for a URL.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        header: Mapping[str, Any],
        *,
        mode: str = "new",
        post: Callable[[ShardInfo], None] | None = None,
        lock: Any = None,
    ) -> None:
        if mode not in ("new", "overwrite", "resume"):
            raise ValueError(f"mode={mode!r} must be 'new', 'overwrite' or 'resume'")
        # A URL gets its place in object storage, never a local folder named ``s3:``.
        self.place = RemotePlace(str(out_dir)) if urls.is_remote(out_dir) else FolderPlace(out_dir)
        self.header = dict(header)
        self.k = int(self.header["batches_per_shard"])
        self.post = post
        self.shards: list[ShardInfo] = []
        self.resume_states: list[Any] = []
        self._states: list[Any] = []  # per completed shard: the state of its last batch
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_state: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[tuple[ShardInfo, Any]] | None = None
        self._seen = 0
        self.complete = False
        self._own_lock = lock is None
        self._lock: Any = self.place.take_lock() if lock is None else lock  # before anything there is read
        try:
            if mode == "resume":
                self.complete, self.shards, self._states = self.place.resume(self.header, self.k)
            else:
                self.place.clear(mode)
            if not self.complete:
                self._save_partial(self._records())
            else:
                self._release()  # a finished export: nothing to write, nothing to guard
        except BaseException:
            self._release()
            raise
        self.skip = len(self.shards) * self.k
        self.resume_states = list(self._states)

    def _release(self, *, quick: bool = False) -> None:
        if self._own_lock:
            if quick and isinstance(self._lock, RemoteLock):
                self._lock.release(quick=True)
            else:
                self._lock.release()

    def _check_lock(self) -> None:
        self.place.check_lock(self._lock)

    def _save_partial(self, records: list[dict[str, Any]]) -> None:
        self._check_lock()
        self.place.save_partial(self.header, records)

    def _write_shard(
        self, i: int, pending: list[dict[str, np.ndarray]], records: list[dict[str, Any]], state: Any
    ) -> tuple[ShardInfo, Any]:
        """Runs on the writer thread: shard ``i``, then the partial record that lists it."""
        try:
            self._check_lock()
            info = self.place.put_shard(i, pending, self.header)
            self._save_partial([*records, shard_record(info, state)])
        except StorageError as exc:
            raise self._not_written(shard_name(i), exc) from exc
        return info, state

    def _not_written(self, name: str, exc: StorageError) -> StorageError:
        """A storage failure while writing ``name``, told as that: the URL written and the fix (the request that
        failed, the lock's check or the record's, is only its cause)."""
        what = f"uploading {urls.join(str(self.place.where), name)!r} failed"
        fix = "then rerun the export with --resume (it keeps the shards already uploaded)"
        if exc.__cause__ is None:  # a permanent refusal: its own message names what to fix
            return StorageError(f"{what}: {exc}; {fix}")
        return StorageError(
            f"{what}: the storage did not answer ({type(exc.__cause__).__name__}, retried until "
            f"STREAMCLI_STORAGE_DEADLINE_S); check the connection and the service, {fix}"
        )

    def read_manifest(self) -> dict[str, Any]:
        """The manifest of a finished export (``complete``)."""
        return self.place.read_manifest()

    def _records(self) -> list[dict[str, Any]]:
        return [shard_record(info, state) for info, state in zip(self.shards, self._states, strict=True)]

    def seeked(self) -> None:
        """The caller has positioned its batches right after the kept shards (by loading their state), so every
        batch written from now on is new: nothing is skipped."""
        self._seen, self.skip = self.skip, 0

    @property
    def seen(self) -> int:
        """Batches fed to ``write`` so far, those already on disk included."""
        return self._seen

    def write(self, batch: Batch, *, state: dict[str, Any] | None = None) -> None:
        """Add one batch; batches already in complete shards (see ``skip``) are dropped.

        ``state`` (JSON data, e.g. the loader's position after this batch) is saved in ``.partial.json``
        with the shard in which this batch is the last one.
        """
        self._seen += 1
        if self._seen <= self.skip:
            return
        arrays = _batch_arrays(batch)
        if not self.header.get("sources"):
            arrays.pop("run.source", None)
        elif "run.source" not in arrays:
            raise ShardError("the export's header names mixed sources, but a batch has no batch.source")
        self._pending.append(arrays)
        self._pending_state = state
        if len(self._pending) >= self.k:
            self._flush()

    def _flush(self) -> None:
        """Hand the pending batches to the writer thread, so that writing overlaps loading.

        At most one shard is in flight (memory stays at about two shards) and shards finish in order.
        """
        self._collect()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamcli-export")
        self._future = self._pool.submit(
            self._write_shard, len(self.shards), pending, self._records(), self._pending_state
        )

    def _collect(self) -> None:
        if self._future is None:
            return
        future, self._future = self._future, None
        try:
            info, state = future.result()  # re-raises a failed write here, in the caller's thread
        except OSError as exc:
            raise ShardError(
                f"cannot write a shard in {self.place.where!r}: {exc.strerror or exc}; "
                "fix that (e.g. free some space) and rerun with --resume"
            ) from exc
        self.shards.append(info)
        self._states.append(state)
        if self.post is not None:
            self.post(info)

    def close(self) -> dict[str, Any]:
        """Write the last short shard and the manifest; return the manifest."""
        self._flush()
        self._collect()
        self._shutdown()
        manifest = dict(self.header)
        manifest["shards"] = [s.to_json() for s in self.shards]
        manifest["batches"] = sum(s.batches for s in self.shards)
        try:
            self._check_lock()
            self.place.commit(manifest)
        except StorageError as exc:
            raise self._not_written(MANIFEST, exc) from exc
        self.complete = True
        self._release()
        return manifest

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            if exc_type is None and not self.complete:
                self.close()
                return
            try:  # on an error, let the in-flight shard finish so that --resume keeps it; the rest is redone
                self._collect()
            except Exception:
                pass
            finally:
                self._shutdown()
        finally:
            self._release(quick=isinstance(exc_type, type) and issubclass(exc_type, StorageError))


batch_arrays = _batch_arrays
"""One batch as the numpy arrays of a shard (public for other executors, such as the Ray export)."""
