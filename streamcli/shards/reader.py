"""Read an export back, from a folder or a URL: ``load_manifest``, ``open_shard``, ``ShardReader`` (the exported
batches, bit-identically) and ``verify``. A URL is served by ``remote_reader``; a folder by ``records`` and ``npz``.

Safe on hostile input: pickles are never loaded, manifest shard names must be plain file names inside the
export folder, and every member's shape and dtype is checked against the manifest before it becomes a
tensor. A truncated or corrupted shard raises ``ShardError`` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.format import LOCK, MANIFEST, PARTIAL, SHARD_RE, is_temp_name
from streamcli.shards.lock import busy
from streamcli.shards.npz import open_folder_shard
from streamcli.shards.npz_write import extra_members
from streamcli.shards.records import load_folder_manifest
from streamcli.shards.remote_lock import busy as remote_busy
from streamcli.shards.remote_reader import load_manifest_url, open_shard_url
from streamcli.shards.runs import as_steps, stored_members
from streamcli.source import Field
from streamcli.storage import urls
from streamcli.storage.remote import Remote

if TYPE_CHECKING:
    from streamcli.batch import Batch


def load_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and validate ``index.json``; raise ``ShardError`` naming the file and the problem.

    The result carries ``"_fields"``, the fields as ``Field`` objects. ``out_dir`` may be a URL (``s3://...``).
    """
    if urls.is_remote(out_dir):
        return load_manifest_url(str(out_dir))
    return load_folder_manifest(out_dir)


def open_shard(
    out_dir: str | os.PathLike[str],
    m: Mapping[str, Any],
    entry: Mapping[str, Any],
    *,
    check: bool = False,
    only: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """One shard's members (``only`` those, if given), checked against the manifest ``m``.

    Uncompressed members are memory-mapped; compressed ones are decompressed once (a zstd frame only after its
    ``.npy`` header and declared size agree with the manifest). ``check`` also compares
    the file's sha256 with the manifest entry (one more pass over its bytes). Raises ``ShardError`` naming
    the shard if it is missing, truncated, corrupted, pickled or of the wrong shape. At a URL the members are
    read into memory (nothing to map). A shard of format 2 gives the same members as one of format 1: per-step
    ``flag.*`` arrays made from its runs, and each field in its own dtype (``runs.as_steps``).
    """
    stored = None if only is None else stored_members(m, only)
    if urls.is_remote(out_dir):
        arrays = open_shard_url(str(out_dir), m, entry, check=check, only=stored)
    else:
        arrays = open_folder_shard(out_dir, m, entry, check=check, only=stored)
    return as_steps(m, arrays, int(entry["batches"]), only)


class ShardReader:
    """Iterate an export's batches, bit-identical to the exported ones, as ``Batch`` objects.

    Args:
        out_dir: the folder written by ``streamcli export``, or its URL (``s3://bucket/run``: read by ranges).
        check: compare each shard's sha256 with the manifest before using it. Off by default: it reads
            every byte once more, which slows replay down. Structure, shapes and dtypes are always checked, so a
            truncated shard is always caught; a flipped bit inside the data of an uncompressed shard is
            caught only by ``check=True`` or ``verify`` (compressed members carry a zip CRC that is checked).

    Uncompressed shards are memory-mapped: the tensors of a batch view the map (copy-on-write, so writing
    to them never changes the file), and the map lives as long as any of them does. ``len(reader)`` is the
    number of batches; ``fields``, ``manifest`` and ``stream_name(i)`` describe them. An export of a mix gives
    ``batch.source`` back, indexing ``sources`` (the mixed sources' names; empty otherwise).
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, check: bool = False) -> None:
        self.out_dir: str | Path = str(out_dir) if urls.is_remote(out_dir) else Path(urls.local_path(out_dir))
        self.check = check
        self.manifest = load_manifest(out_dir)
        self.fields: tuple[Field, ...] = tuple(self.manifest["_fields"])
        self.layout: str = self.manifest["layout"]
        self.batch_size: int = int(self.manifest["batch_size"])
        self.time_steps: int = int(self.manifest["time_steps"])
        self.sources: list[str] = list(self.manifest.get("sources") or [])

    def __len__(self) -> int:
        return int(self.manifest["batches"])

    def stream_name(self, i: int) -> str:
        names = self.manifest.get("streams") or []
        return str(names[i]) if 0 <= i < len(names) else str(i)

    def stream_length(self, i: int) -> int | None:
        lengths = self.manifest.get("stream_lengths") or []
        return lengths[i] if 0 <= i < len(lengths) else None

    def shards(self) -> Iterator[dict[str, np.ndarray]]:
        """The arrays of each shard in turn (memory-mapped when the export is uncompressed)."""
        for entry in self.manifest["shards"]:
            yield open_shard(self.out_dir, self.manifest, entry, check=self.check)

    def __iter__(self) -> Iterator[Batch]:
        for arrays in self.shards():
            for k in range(len(arrays["meta.index"])):
                yield self.batch_of(arrays, k)

    def batch(self, k: int) -> Batch:
        """The export's batch ``k`` (0-based, across shards): only its shard is opened (``IndexError`` past the
        end)."""
        if not 0 <= k < len(self):
            raise IndexError(f"batch {k} is not in the export: it has {len(self)} batches (0..{len(self) - 1})")
        for entry in self.manifest["shards"]:
            n = int(entry["batches"])
            if k < n:
                return self.batch_of(open_shard(self.out_dir, self.manifest, entry, check=self.check), k)
            k -= n
        raise IndexError(f"batch {k} is not in the export's shards")  # (a manifest whose counts disagree)

    def batch_of(self, arrays: Mapping[str, np.ndarray], k: int) -> Batch:
        """Batch ``k`` of one shard's arrays (``open_shard``), as tensors that view them."""
        import torch

        from streamcli.batch import FLAGS, Batch

        def member(key: str) -> torch.Tensor:
            return torch.from_numpy(np.asarray(arrays[key][k]))

        flags = {n: member(f"flag.{n}") for n in FLAGS}
        return Batch(
            data={f.name: member(f"data.{f.name}") for f in self.fields},
            is_first=flags["is_first"],
            reset=member("flag.reset"),
            valid=flags["valid"],
            stream=flags["stream"],
            position=flags["position"],
            replayed=flags["replayed"],
            epoch=int(arrays["meta.epoch"][k]),
            index=int(arrays["meta.index"][k]),
            layout=self.layout,
            source=member("flag.source") if "flag.source" in arrays else None,
        )


def verify(out_dir: str | os.PathLike[str]) -> list[str]:
    """Check an export's manifest, checksums, members, shapes, batch counts, streams and files; return every
    problem. Changes nothing in the folder.

    Every file in the folder that the manifest does not name is a problem too, and so is an export that is
    writing the folder right now. ``out_dir`` may be a URL.
    """
    remote = Remote(str(out_dir)) if urls.is_remote(out_dir) else None
    if remote is None:
        out_dir = urls.local_path(out_dir)
    where = remote.url if remote is not None else str(out_dir)
    holder = remote_busy(remote) if remote is not None else busy(out_dir)
    if holder is not None:
        return [f"an export is writing {where!r} right now ({holder}); verify it once that has finished"]
    try:
        m = load_manifest(out_dir)
    except ShardError as exc:
        return [str(exc)]

    def extra_of(name: str) -> list[str]:
        if remote is None:
            return extra_members(Path(out_dir) / name, m)
        with remote.open(name) as f:
            return extra_members(f, m)

    problems, listed = _shard_problems(m, lambda entry: open_shard(out_dir, m, entry, check=True), extra_of)
    if remote is not None:
        kinds = {n: "object" for n in remote.listing()}
        place = f"is in {remote.url!r}"
    else:
        kinds = {p.name: "folder" if p.is_dir() else "file" for p in Path(out_dir).iterdir()}
        place = "is on disk"
    for n in sorted(kinds):
        if n in (MANIFEST, LOCK) or n in listed:  # a lock file nobody holds is left by a kill: harmless
            continue
        kind = "shard" if SHARD_RE.match(n) else kinds[n]
        hint = ""
        if n == PARTIAL or is_temp_name(n):
            hint = " (left by a kill while the export finished; streamcli export ... --resume removes it)"
        problems.append(f"{kind} {n!r} {place} but not in the manifest{hint}")
    return problems


def _shard_problems(
    m: dict[str, Any],
    open_one: Callable[[Mapping[str, Any]], dict[str, np.ndarray]],
    extra_of: Callable[[str], list[str]],
) -> tuple[list[str], set[str]]:
    """``verify``'s check of each shard the manifest lists (opened by ``open_one``, its checksum included; members
    the format does not name from ``extra_of``) and of their batch counts; also returns the names listed."""
    problems: list[str] = []
    listed: set[str] = set()
    total = 0
    for entry in m["shards"]:
        name = entry["name"]
        listed.add(name)
        total += int(entry["batches"])  # each shard's real count is checked against its entry below
        try:
            arrays = open_one(entry)
        except ShardError as exc:
            problems.append(str(exc))
            continue
        problems += _stream_problems(m, name, arrays)
        extra = extra_of(name)
        if extra:
            problems.append(f"shard {name!r} holds unexpected members: {', '.join(extra)}")
    if total != m["batches"]:
        problems.append(f"the shard entries add up to {total} batches, the manifest says {m['batches']}")
    return problems, listed


def _stream_problems(m: dict[str, Any], name: str, arrays: dict[str, np.ndarray]) -> list[str]:
    """Where the valid steps of a shard disagree with the manifest's ``streams`` and ``stream_lengths``."""
    valid = arrays["flag.valid"].astype(bool)
    ids, pos = arrays["flag.stream"][valid], arrays["flag.position"][valid]
    streams, lengths = m.get("streams") or [], m.get("stream_lengths") or []
    n = len(streams) or len(lengths)
    if not len(ids) or not n:  # an export that names no streams (made by hand) has nothing to check against
        return []
    if ids.min() < 0 or ids.max() >= n:
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        return [f"shard {name!r} holds valid steps of stream {bad}, but the manifest's streams are 0..{n - 1}"]
    if pos.min() < 0:
        return [f"shard {name!r} holds a valid step at position {int(pos.min())}"]
    if lengths:
        limit = np.array([np.iinfo(np.int64).max if x is None else x for x in lengths], dtype=np.int64)
        over = pos >= limit[ids]
        if over.any():
            i = int(np.flatnonzero(over)[0])
            sid = int(ids[i])
            label = f"stream {sid}" + (f" ({streams[sid]!r})" if streams else "")
            return [f"shard {name!r} holds step {int(pos[i])} of {label}, but stream_lengths says {lengths[sid]} steps"]
    return []
