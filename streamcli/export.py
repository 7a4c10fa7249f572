"""Write batches as ``.npz`` shards plus an ``index.json`` manifest, atomically and reproducibly.

A shard ``shard-00000.npz`` holds K consecutive batches: each field as ``data.<name>`` of shape
``(K, T, B, ...)`` (``(K, B, T, ...)`` for layout ``"BT"``), each flag as ``flag.<name>`` likewise,
``flag.reset`` ``(K, B)``, and ``meta.epoch`` / ``meta.index`` ``(K,)``.

Shard bytes depend only on the batches: members are written in a fixed order with a fixed zip timestamp
(``np.savez`` stamps the current time), so an export resumed after ``kill -9`` is byte-identical to an
uninterrupted one. Each shard is written under a temporary name and renamed; the settings go to
``.partial.json`` first and ``index.json`` is written last, so a half-written file is never taken for a
whole one. The library never prints: progress goes to a callback.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.source import Field

if TYPE_CHECKING:
    from streamcli.batch import Batch

FORMAT = "streamcli-npz-shards"
FORMAT_VERSION = 1
MANIFEST = "index.json"
PARTIAL = ".partial.json"
SHARD_RE = re.compile(r"^shard-(\d{5,})\.npz$")
# Flags are stored with fixed dtypes so that the manifest can state them before the first batch.
FLAG_DTYPES: dict[str, str] = {
    "is_first": "|b1",
    "valid": "|b1",
    "stream": "<i8",
    "position": "<i8",
    "replayed": "|b1",
}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)

Progress = Callable[[int, int], None]
"""``progress(batches_written, bytes_written)``; called after each batch."""


def shard_name(i: int) -> str:
    return f"shard-{i:05d}.npz"


def batch_nbytes(fields: Sequence[Field], batch_size: int, time_steps: int) -> int:
    """Bytes one batch takes in a shard (fields, flags, reset and the two meta scalars)."""
    per_step = sum(f.nbytes for f in fields) + sum(np.dtype(d).itemsize for d in FLAG_DTYPES.values())
    return per_step * batch_size * time_steps + batch_size + 16


def make_header(
    *,
    fields: Sequence[Field],
    batch_size: int,
    time_steps: int,
    layout: str,
    source: Mapping[str, Any],
    loader: Mapping[str, Any],
    shard_bytes: int,
    compress: bool,
    streams: Sequence[str] = (),
    stream_lengths: Sequence[int | None] = (),
) -> dict[str, Any]:
    """The manifest minus its shard list: everything that decides the bytes of the shards."""
    from streamcli import __version__

    per_batch = batch_nbytes(fields, batch_size, time_steps)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "streamcli_version": __version__,
        "source": dict(source),
        "loader": dict(loader),
        "fields": [{"name": f.name, "shape": list(f.shape), "dtype": f.dtype} for f in fields],
        "flags": dict(FLAG_DTYPES),
        "batch_size": int(batch_size),
        "time_steps": int(time_steps),
        "layout": layout,
        "compression": "deflate" if compress else None,
        "batches_per_shard": max(1, int(shard_bytes) // per_batch),
        "streams": list(streams),
        "stream_lengths": list(stream_lengths),
    }
    out: dict[str, Any] = json.loads(json.dumps(header))  # as it will read back (tuples become lists)
    return out


@dataclass(frozen=True)
class ShardInfo:
    name: str
    batches: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "batches": self.batches, "bytes": self.bytes, "sha256": self.sha256}


def _batch_arrays(batch: Batch) -> dict[str, np.ndarray]:
    """One batch as numpy copies (copies, so the loader can recycle its shared slot at once)."""
    out = {f"data.{k}": np.array(v.numpy(), copy=True) for k, v in batch.data.items()}
    for name, dtype in FLAG_DTYPES.items():
        out[f"flag.{name}"] = np.array(getattr(batch, name).numpy(), dtype=dtype, copy=True)
    out["flag.reset"] = np.array(batch.reset.numpy(), dtype="|b1", copy=True)
    out["meta.epoch"] = np.array(batch.epoch, dtype="<i8")
    out["meta.index"] = np.array(batch.index, dtype="<i8")
    return out


def member_names(header: Mapping[str, Any]) -> list[str]:
    """The arrays of a shard, in the fixed order they are written."""
    names = [f"data.{f['name']}" for f in header["fields"]]
    names += [f"flag.{n}" for n in FLAG_DTYPES] + ["flag.reset", "meta.epoch", "meta.index"]
    return names


def write_npz(path: Path, arrays: Mapping[str, np.ndarray], compress: bool) -> None:
    """Write ``arrays`` as an ``.npz`` with fixed timestamps, atomically (temp name, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a string path
        with zipfile.ZipFile(f, "w", compression=method, allowZip64=True) as zf:
            for name, arr in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
                info.compress_type = method
                info.external_attr = 0o644 << 16
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


class ShardWriter:
    """Collect batches and roll them into shards of ``header["batches_per_shard"]`` batches.

    Args:
        out_dir: the export folder (created if missing).
        header: from ``make_header``; saved to ``.partial.json`` at once and into ``index.json`` at the end.
        mode: ``"new"`` refuses a non-empty folder, ``"overwrite"`` deletes a previous export in it,
            ``"resume"`` keeps the complete shards of an interrupted export with the same header.
        post: called with each shard's ``ShardInfo`` once it is on disk.

    After construction, ``skip`` is the number of batches already in complete shards (resume): feed the
    writer the same batch sequence from the start and it drops that many before writing.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        header: Mapping[str, Any],
        *,
        mode: str = "new",
        post: Callable[[ShardInfo], None] | None = None,
    ) -> None:
        if mode not in ("new", "overwrite", "resume"):
            raise ValueError(f"mode={mode!r} must be 'new', 'overwrite' or 'resume'")
        self.out_dir = Path(out_dir)
        self.header = dict(header)
        self.k = int(self.header["batches_per_shard"])
        self.compress = self.header.get("compression") is not None
        self.post = post
        self.shards: list[ShardInfo] = []
        self._pending: list[dict[str, np.ndarray]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[ShardInfo] | None = None
        self._inflight = 0
        self._seen = 0
        self.complete = False
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if mode == "resume":
            self._resume()
        else:
            ours = self._our_files()
            others = [p for p in self.out_dir.iterdir() if p not in ours]
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
            for p in ours:
                p.unlink()
        _write_json(self.out_dir / PARTIAL, self.header)
        self.skip = len(self.shards) * self.k

    def _our_files(self) -> list[Path]:
        return [
            p
            for p in self.out_dir.iterdir()
            if SHARD_RE.match(p.name)
            or p.name in (MANIFEST, PARTIAL)
            or (p.name.startswith(".") and p.name.endswith(".tmp"))
        ]

    def _resume(self) -> None:
        if (self.out_dir / MANIFEST).exists():
            self._check_same(json.loads((self.out_dir / MANIFEST).read_text()))
            self.complete = True
            return
        partial = self.out_dir / PARTIAL
        if not partial.exists():
            if any(self.out_dir.iterdir()):
                raise ShardError(f"{str(self.out_dir)!r} holds no interrupted export to resume")
            return
        self._check_same(json.loads(partial.read_text()))
        for p in self.out_dir.iterdir():
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                p.unlink()  # a shard or manifest that was being written when the export was killed
        i = 0
        while (path := self.out_dir / shard_name(i)).exists():
            n = _complete_batches(path, self.header)
            if n != self.k:  # a short shard is only ever the last one, written with the manifest
                break
            self.shards.append(ShardInfo(path.name, n, path.stat().st_size, sha256_file(path)))
            i += 1
        for p in self.out_dir.iterdir():
            m = SHARD_RE.match(p.name)
            if m and int(m.group(1)) >= i:
                p.unlink()

    def _check_same(self, old: Mapping[str, Any]) -> None:
        for key, value in self.header.items():
            if key != "streamcli_version" and old.get(key) != value:
                raise ShardError(
                    f"cannot resume: {key} was {old.get(key)!r} in the interrupted export and is {value!r} "
                    "now; rerun with the same options, or use --overwrite"
                )

    @property
    def batches_written(self) -> int:
        return sum(s.batches for s in self.shards) + self._inflight + len(self._pending)

    def write(self, batch: Batch) -> None:
        """Add one batch; batches already in complete shards (see ``skip``) are dropped."""
        self._seen += 1
        if self._seen <= self.skip:
            return
        self._pending.append(_batch_arrays(batch))
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
        path = self.out_dir / shard_name(len(self.shards))
        self._inflight = len(pending)
        self._future = self._pool.submit(_write_shard, path, pending, self.compress)

    def _collect(self) -> None:
        if self._future is None:
            return
        future, self._future = self._future, None
        self._inflight = 0
        info = future.result()  # re-raises a failed write here, in the caller's thread
        self.shards.append(info)
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
        _write_json(self.out_dir / MANIFEST, manifest)
        (self.out_dir / PARTIAL).unlink(missing_ok=True)
        self.complete = True
        return manifest

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None and not self.complete:
            self.close()
        else:  # on an error, let an in-flight shard finish (or not) and leave the rest for --resume
            self._shutdown()


def _write_shard(path: Path, pending: list[dict[str, np.ndarray]], compress: bool) -> ShardInfo:
    arrays = {n: np.stack([b[n] for b in pending]) for n in pending[0]}
    write_npz(path, arrays, compress)
    return ShardInfo(path.name, len(pending), path.stat().st_size, sha256_file(path))


def _complete_batches(path: Path, header: Mapping[str, Any]) -> int:
    """How many batches a shard on disk holds, or -1 if it is unreadable (then it is rewritten)."""
    try:
        with zipfile.ZipFile(path) as zf:
            if zf.testzip() is not None:
                return -1
            with np.load(path, allow_pickle=False) as npz:
                if sorted(npz.files) != sorted(member_names(header)):
                    return -1
                return int(npz["meta.index"].shape[0])
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        return -1


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
    with ShardWriter(out_dir, header, mode=mode) as writer:
        if writer.complete:
            return dict(json.loads((writer.out_dir / MANIFEST).read_text()))
        nbytes = batch_nbytes(
            [Field(f["name"], tuple(f["shape"]), f["dtype"]) for f in header["fields"]],
            header["batch_size"],
            header["time_steps"],
        )
        for batch in batches:
            writer.write(batch)
            if progress is not None:
                progress(writer._seen, writer._seen * nbytes)
        return writer.close()


def iter_limit(epochs: Iterator[Iterable[Batch]], batches: int | None) -> Iterator[Batch]:
    """Chain the epochs and stop after ``batches`` (if given)."""
    n = 0
    if batches is not None and batches <= 0:
        return
    for epoch in epochs:
        for batch in epoch:
            yield batch
            n += 1
            if batches is not None and n >= batches:
                return  # before pulling (and decoding) one batch too many
