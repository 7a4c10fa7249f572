"""``FolderPlace``: where a ``ShardWriter`` writes an export into a local folder; the shard bytes of every place.

Each shard is written under a temporary name and renamed into place (``npz.write_npz``); then the record of every
completed shard is saved in ``.partial.json`` (``write_partial``), so resuming keeps exactly the shards whose bytes
match their record. ``index.json`` comes last, the commit point, and ``.partial.json`` is then removed; a kill
between the two leaves a stale ``.partial.json`` that ``--resume`` and ``verify`` remove.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.codec import Codec
from streamcli.shards.format import (
    LOCK,
    MANIFEST,
    PARTIAL,
    SHARD_RE,
    ShardInfo,
    is_export_file,
    is_temp_name,
    member_names,
    shard_name,
)
from streamcli.shards.lock import FolderLock
from streamcli.shards.npz_write import complete_batches, sha256_file, write_npz
from streamcli.shards.records import read_partial, tidy, write_json, write_partial
from streamcli.shards.runs import shard_arrays
from streamcli.storage import urls


class Kept(NamedTuple):
    """What a place keeps of an earlier export when resuming: its complete shards, each with its record's
    ``state``, or ``complete`` when that export had finished (then nothing is to be written)."""

    complete: bool
    shards: list[ShardInfo]
    states: list[Any]


def check_same_header(old: Mapping[str, Any], header: Mapping[str, Any]) -> None:
    """Raise ``ShardError`` naming the first setting in which an interrupted export differs from ``header``."""
    for key, value in header.items():
        if key != "streamcli_version" and old.get(key) != value:
            raise ShardError(
                f"cannot resume: {key} was {old.get(key)!r} in the interrupted export and is {value!r} "
                "now; rerun with the same options, or use --overwrite"
            )


def shard_record(info: ShardInfo, state: Any) -> dict[str, Any]:
    """A completed shard's entry in the partial record: its ``ShardInfo`` and the state after its last batch."""
    return {**info.to_json(), "state": state}


def write_shard_file(path: Path, pending: list[dict[str, np.ndarray]], header: Mapping[str, Any]) -> ShardInfo:
    """Write one shard of ``pending`` batches (from ``batch_arrays``) atomically; the same bytes at every place."""
    arrays = shard_arrays(pending, member_names(header), header)
    write_npz(path, arrays, Codec.of(header))
    return ShardInfo(path.name, len(pending), path.stat().st_size, sha256_file(path))


class FolderPlace:
    """An export folder, created if missing (``file://`` URLs too), as a ``ShardWriter`` writes it."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.path = Path(urls.local_path(out_dir))
        self.where = str(self.path)

    def take_lock(self) -> FolderLock:
        return FolderLock(self.path)

    def check_lock(self, lock: Any) -> None:
        """An OS lock dies with its holder and is never taken over: nothing to check."""

    def clear(self, mode: str) -> None:
        ours = [p for p in self.path.iterdir() if is_export_file(p.name)]
        others = [p for p in self.path.iterdir() if p not in ours and p.name != LOCK]
        if mode == "new" and (ours or others):
            raise ShardError(
                f"{self.where!r} is not empty; pass --overwrite to replace it "
                "or --resume to continue an interrupted export"
            )
        if others:
            raise ShardError(
                f"{self.where!r} holds files that are not part of an export "
                f"(e.g. {others[0].name!r}); refusing to overwrite it"
            )
        (self.path / MANIFEST).unlink(missing_ok=True)  # first: a half-deleted export is never complete
        for p in ours:
            p.unlink(missing_ok=True)

    def resume(self, header: Mapping[str, Any], k: int) -> Kept:
        manifest = self.path / MANIFEST
        if manifest.exists():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ShardError(f"{str(manifest)!r} is not valid JSON ({exc}); rerun with --overwrite") from None
            check_same_header(old, header)
            tidy(self.path)  # a stale .partial.json from a kill while finishing
            return Kept(True, [], [])
        kept = Kept(False, [], [])
        partial = read_partial(self.path)
        if partial is None:
            if any(p.name != LOCK for p in self.path.iterdir()):
                raise ShardError(f"{self.where!r} holds no interrupted export to resume")
            return kept
        old_header, records = partial
        check_same_header(old_header, header)
        for p in self.path.iterdir():
            if is_temp_name(p.name):
                p.unlink()  # a shard or record that was being written when the export was killed
        by_name = {r.get("name"): r for r in records or ()}
        i = 0
        while (path := self.path / shard_name(i)).exists():
            if complete_batches(path, header) != k:  # a short shard is only ever the last one
                break
            info = ShardInfo(path.name, k, path.stat().st_size, sha256_file(path))
            rec = by_name.get(path.name)
            if records is not None and (rec is None or rec.get("sha256") != info.sha256):
                break  # renamed into place but never recorded: rewrite it (same bytes)
            kept.shards.append(info)
            kept.states.append(rec.get("state") if rec is not None else None)
            i += 1
        for p in self.path.iterdir():
            m = SHARD_RE.match(p.name)
            if m and int(m.group(1)) >= i:
                p.unlink()
        return kept

    def save_partial(self, header: Mapping[str, Any], records: list[dict[str, Any]]) -> None:
        write_partial(self.path, dict(header), records)

    def put_shard(self, i: int, pending: list[dict[str, np.ndarray]], header: Mapping[str, Any]) -> ShardInfo:
        return write_shard_file(self.path / shard_name(i), pending, header)

    def commit(self, manifest: dict[str, Any]) -> None:
        write_json(self.path / MANIFEST, manifest)  # the commit point: the export is complete
        (self.path / PARTIAL).unlink(missing_ok=True)

    def read_manifest(self) -> dict[str, Any]:
        return dict(json.loads((self.path / MANIFEST).read_text()))


def prepare_ray(
    out: Path, header: Mapping[str, Any], mode: str, n_shards: int, k: int, total: int, lock: FolderLock
) -> dict[int, Any] | None:
    """``on_ray``'s start for a folder: clear or check it; the shards already complete (number -> record), or None
    if the export is. Ray tasks record no shard, so resuming checks each shard's batches. ``lock`` is held."""
    place = FolderPlace(out)
    if mode != "resume":  # the refusals and clearing; the partial record
        place.clear(mode)
        place.save_partial(header, [])
        return {}
    if (out / MANIFEST).exists():
        place.resume(header, k)  # checks the header, tidies a stale partial record
        return None
    partial = read_partial(out)
    if partial is None:
        raise ShardError(f"{str(out)!r} holds no interrupted export to resume")
    check_same_header(partial[0], header)
    for p in out.iterdir():
        if is_temp_name(p.name):
            p.unlink()
    done: dict[int, Any] = {}
    for i in range(n_shards):
        path = out / shard_name(i)
        want = min(k, total - i * k)
        if path.exists():
            if complete_batches(path, header) == want:
                done[i] = ShardInfo(path.name, want, path.stat().st_size, sha256_file(path)).to_json()
            else:
                path.unlink()
    return done
