"""``ShardWriter``: roll batches into shards on a background thread, resumably.

The header goes to ``.partial.json`` at once; after each shard is renamed into place the record of every
completed shard is saved there too (``write_partial``), so ``mode="resume"`` keeps exactly the shards whose
bytes match their record. Finishing writes ``index.json`` (the commit point) and then removes
``.partial.json``; a kill between the two leaves a stale ``.partial.json`` that ``--resume`` and ``verify``
remove. The library never prints: progress goes to a callback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.batch import FLAG_DTYPES
from streamcli.errors import ShardError
from streamcli.shards.codec import Codec
from streamcli.shards.format import (
    LOCK,
    MANIFEST,
    PARTIAL,
    SHARD_RE,
    ShardInfo,
    batch_nbytes,
    is_export_file,
    is_temp_name,
    manifest_fields,
    read_partial,
    shard_name,
    tidy,
    write_json,
    write_partial,
)
from streamcli.shards.lock import FolderLock
from streamcli.shards.npz import complete_batches, sha256_file, write_npz
from streamcli.storage import urls

if TYPE_CHECKING:
    from streamcli.batch import Batch

Progress = Callable[[int, int], None]
"""``progress(batches_written, bytes_written)``; called after each batch."""


def check_same_header(old: Mapping[str, Any], header: Mapping[str, Any]) -> None:
    """Raise ``ShardError`` naming the first setting in which an interrupted export differs from ``header``."""
    for key, value in header.items():
        if key != "streamcli_version" and old.get(key) != value:
            raise ShardError(
                f"cannot resume: {key} was {old.get(key)!r} in the interrupted export and is {value!r} "
                "now; rerun with the same options, or use --overwrite"
            )


def _batch_arrays(batch: Batch) -> dict[str, np.ndarray]:
    """One batch as numpy copies (copies, so the loader can recycle its shared slot at once)."""
    out = {f"data.{k}": np.array(v.numpy(), copy=True) for k, v in batch.data.items()}
    for name, dtype in FLAG_DTYPES.items():
        out[f"flag.{name}"] = np.array(getattr(batch, name).numpy(), dtype=dtype, copy=True)
    out["flag.reset"] = np.array(batch.reset.numpy(), dtype="|b1", copy=True)
    out["meta.epoch"] = np.array(batch.epoch, dtype="<i8")
    out["meta.index"] = np.array(batch.index, dtype="<i8")
    return out


def _record(info: ShardInfo, state: Any) -> dict[str, Any]:
    return {**info.to_json(), "state": state}


class ShardWriter:
    """Collect batches and roll them into shards of ``header["batches_per_shard"]`` batches.

    Args:
        out_dir: the export folder (created if missing).
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
    """

    def __new__(cls, out_dir: str | os.PathLike[str], *args: Any, **kwargs: Any) -> ShardWriter:
        """A URL (``s3://...``) gets the writer for object storage, never a local folder named ``s3:``."""
        if cls is ShardWriter and urls.is_remote(out_dir):
            from streamcli.storage.writer import RemoteShardWriter

            return super().__new__(RemoteShardWriter)
        return super().__new__(cls)

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
        self.out_dir = Path(urls.local_path(out_dir))
        self.header = dict(header)
        self.k = int(self.header["batches_per_shard"])
        self.codec = Codec.of(self.header)
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
        self._lock: Any = self._take_lock() if lock is None else lock  # before anything in the folder is read
        try:
            if mode == "resume":
                self._resume()
            else:
                self._clear(mode)
            if not self.complete:
                self._save_partial(self._records())
            else:
                self._release()  # a finished export: nothing to write, nothing to guard
        except BaseException:
            self._release()
            raise
        self.skip = len(self.shards) * self.k
        self.resume_states = list(self._states)

    def _release(self) -> None:
        if self._own_lock:
            self._lock.release()

    # Where files go: the object-storage subclass (``streamcli.storage.writer``) overrides these, _clear and _resume.
    def _take_lock(self) -> Any:
        return FolderLock(self.out_dir)

    def _save_partial(self, records: list[dict[str, Any]]) -> None:
        write_partial(self.out_dir, self.header, records)

    def _write_shard(
        self, i: int, pending: list[dict[str, np.ndarray]], records: list[dict[str, Any]], state: Any
    ) -> tuple[ShardInfo, Any]:
        """Runs on the writer thread: shard ``i``, then the partial record that lists it."""
        return _write_shard(self.out_dir / shard_name(i), pending, self.codec, self.header, records, state)

    def _commit(self, manifest: dict[str, Any]) -> None:
        write_json(self.out_dir / MANIFEST, manifest)  # the commit point: the export is complete
        (self.out_dir / PARTIAL).unlink(missing_ok=True)

    def read_manifest(self) -> dict[str, Any]:
        """The manifest of a finished export (``complete``)."""
        return dict(json.loads((self.out_dir / MANIFEST).read_text()))

    def _clear(self, mode: str) -> None:
        ours = [p for p in self.out_dir.iterdir() if is_export_file(p.name)]
        others = [p for p in self.out_dir.iterdir() if p not in ours and p.name != LOCK]
        if mode == "new" and (ours or others):
            raise ShardError(
                f"{str(self.out_dir)!r} is not empty; pass --overwrite to replace it "
                "or --resume to continue an interrupted export"
            )
        if others:
            raise ShardError(
                f"{str(self.out_dir)!r} holds files that are not part of an export "
                f"(e.g. {others[0].name!r}); refusing to overwrite it"
            )
        (self.out_dir / MANIFEST).unlink(missing_ok=True)  # first: a half-deleted export is never complete
        for p in ours:
            p.unlink(missing_ok=True)

    def _records(self) -> list[dict[str, Any]]:
        return [_record(info, state) for info, state in zip(self.shards, self._states, strict=True)]

    def _resume(self) -> None:
        manifest = self.out_dir / MANIFEST
        if manifest.exists():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ShardError(f"{str(manifest)!r} is not valid JSON ({exc}); rerun with --overwrite") from None
            self._check_same(old)
            tidy(self.out_dir)  # a stale .partial.json from a kill while finishing
            self.complete = True
            return
        partial = read_partial(self.out_dir)
        if partial is None:
            if any(p.name != LOCK for p in self.out_dir.iterdir()):
                raise ShardError(f"{str(self.out_dir)!r} holds no interrupted export to resume")
            return
        old_header, records = partial
        self._check_same(old_header)
        for p in self.out_dir.iterdir():
            if is_temp_name(p.name):
                p.unlink()  # a shard or record that was being written when the export was killed
        by_name = {r.get("name"): r for r in records or ()}
        i = 0
        while (path := self.out_dir / shard_name(i)).exists():
            if complete_batches(path, self.header) != self.k:  # a short shard is only ever the last one
                break
            info = ShardInfo(path.name, self.k, path.stat().st_size, sha256_file(path))
            rec = by_name.get(path.name)
            if records is not None and (rec is None or rec.get("sha256") != info.sha256):
                break  # renamed into place but never recorded: rewrite it (same bytes)
            self.shards.append(info)
            self._states.append(rec.get("state") if rec is not None else None)
            i += 1
        for p in self.out_dir.iterdir():
            m = SHARD_RE.match(p.name)
            if m and int(m.group(1)) >= i:
                p.unlink()

    def _check_same(self, old: Mapping[str, Any]) -> None:
        check_same_header(old, self.header)

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
        self._pending.append(_batch_arrays(batch))
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
                f"cannot write a shard in {str(self.out_dir)!r}: {exc.strerror or exc}; "
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
        self._commit(manifest)
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
            self._release()


def open_writer(
    out_dir: str | os.PathLike[str],
    header: Mapping[str, Any],
    *,
    mode: str = "new",
    post: Callable[[ShardInfo], None] | None = None,
    lock: Any = None,
) -> ShardWriter:
    """A ``ShardWriter`` for ``out_dir``: a local folder (``file://`` URLs too), or a URL served by fsspec
    (``streamcli.storage.writer.RemoteShardWriter``; ``UnsupportedURLError`` if fsspec cannot serve it)."""
    return ShardWriter(out_dir, header, mode=mode, post=post, lock=lock)


def _write_shard(
    path: Path,
    pending: list[dict[str, np.ndarray]],
    codec: Codec,
    header: Mapping[str, Any],
    records: list[dict[str, Any]],
    state: Any,
) -> tuple[ShardInfo, Any]:
    arrays = {n: np.stack([b[n] for b in pending]) for n in pending[0]}
    write_npz(path, arrays, codec)
    info = ShardInfo(path.name, len(pending), path.stat().st_size, sha256_file(path))
    write_partial(path.parent, header, [*records, _record(info, state)])
    return info, state


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


batch_arrays = _batch_arrays
"""One batch as the numpy arrays of a shard (public for other executors, such as the Ray export)."""


def write_shard_file(path: Path, pending: list[dict[str, np.ndarray]], header: Mapping[str, Any]) -> ShardInfo:
    """Write one shard of ``pending`` batches (from ``batch_arrays``) atomically; the same bytes as ``ShardWriter``."""
    arrays = {n: np.stack([b[n] for b in pending]) for n in pending[0]}
    write_npz(path, arrays, Codec.of(header))
    return ShardInfo(path.name, len(pending), path.stat().st_size, sha256_file(path))


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
    byte-identical to an uninterrupted export.
    """
    import itertools

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
