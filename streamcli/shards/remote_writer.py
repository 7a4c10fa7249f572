"""``RemotePlace``: where a ``ShardWriter`` writes an export at a URL, in the local folder's order and bytes.

Each shard is written to a local temporary file with the local writer's code (so its bytes are the same), then
uploaded as one object (a put, or a multipart upload, is atomic: an object is whole or absent), then the partial
record that lists it is put. ``index.json`` comes last, the commit point, and ``.partial.json`` is then deleted.

Resuming keeps each shard that the partial record lists with the same size and a full count of batches: a record
is written only after its shard's upload completed, so such an object is whole, and its recorded checksum is its
own (no shard is downloaded again). A shard uploaded but not recorded (a kill in between) is written again with
the same bytes. One export per URL at a time: ``RemoteLock``.

A shard waits for its upload in ``$TMPDIR/streamcli-upload-<pid>-*``, removed once it is up or has failed; a kill -9
cannot remove it, so each export at a URL first removes those of processes that are gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.folder_writer import Kept, check_same_header, write_shard_file
from streamcli.shards.format import LOCK, MANIFEST, PARTIAL, SHARD_RE, ShardInfo, is_export_file, shard_name
from streamcli.shards.npz_write import complete_batches, sha256_file
from streamcli.shards.records import json_bytes
from streamcli.shards.remote_lock import RemoteLock
from streamcli.shards.remote_reader import read_json
from streamcli.storage.remote import Remote

_STALE = re.compile(r"^streamcli-(?:upload|check)-(\d+)-")


def temp_dir(kind: str = "upload") -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for shards on their way, named with this process's pid (``remove_stale`` reads it)."""
    return tempfile.TemporaryDirectory(prefix=f"streamcli-{kind}-{os.getpid()}-")


def remove_stale() -> list[str]:
    """Remove the temporary folders of exports whose process is gone (a kill -9 mid-upload); return their paths."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(tempfile.gettempdir()):
            m = _STALE.match(entry.name)
            if m is None or not entry.is_dir(follow_symlinks=False) or _alive(int(m.group(1))):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid: not ours to judge
    return True


def put_shard(remote: Remote, i: int, pending: list[dict[str, np.ndarray]], header: Mapping[str, Any]) -> ShardInfo:
    """Write shard ``i`` to a local temporary file with the local writer (the same bytes), then upload it whole."""
    with temp_dir() as tmp:
        info = write_shard_file(Path(tmp) / shard_name(i), pending, header)
        remote.upload(Path(tmp) / info.name, info.name)
    return info


def prepare_ray(
    remote: Remote, header: Mapping[str, Any], mode: str, n_shards: int, k: int, total: int, lock: RemoteLock
) -> dict[int, Any] | None:
    """``on_ray``'s start for a URL: clear or check it; the shards already complete (number -> record), or None
    if the export is. Ray tasks record no shard, so resuming checks each shard there by downloading it."""
    place = RemotePlace(remote.url)
    if mode != "resume":  # the refusals and clearing; the partial record
        place.clear(mode)
        place.check_lock(lock)
        place.save_partial(header, [])
        return {}
    if remote.size(MANIFEST) is not None:
        place.resume(header, k)  # checks the header, tidies
        return None
    partial = read_json(remote, PARTIAL, "; rerun the export with --overwrite")
    if partial is None:
        raise ShardError(f"{remote.url!r} holds no interrupted export to resume")
    check_same_header(partial.get("header", partial), header)
    listing = remote.listing()
    done: dict[int, Any] = {}
    with temp_dir("check") as tmp:
        for i in range(n_shards):
            name, want = shard_name(i), min(k, total - i * k)
            if name not in listing:
                continue
            local = Path(tmp) / name
            local.write_bytes(remote.read(name))
            if complete_batches(local, header) == want:
                done[i] = ShardInfo(name, want, local.stat().st_size, sha256_file(local)).to_json()
            else:
                remote.remove(name)
            local.unlink()
    return done


def commit(remote: Remote, manifest: Mapping[str, Any]) -> None:
    """Write ``index.json`` (the commit point), then delete the partial record."""
    remote.write(MANIFEST, json_bytes(dict(manifest)))
    remote.remove(PARTIAL)


class RemotePlace:
    """An export at a URL (``s3://bucket/run``), as a ``ShardWriter`` writes it; its lock is a ``RemoteLock``."""

    def __init__(self, url: str) -> None:
        self.remote = Remote(url)
        self.url = self.where = self.remote.url
        remove_stale()  # what a killed export left in $TMPDIR

    def take_lock(self) -> RemoteLock:
        return RemoteLock(self.remote)

    def check_lock(self, lock: Any) -> None:
        """Stop here if another export took the lock over (its heartbeat went stale)."""
        if isinstance(lock, RemoteLock):
            lock.check()

    def clear(self, mode: str) -> None:
        names = [n for n in self.remote.listing() if n != LOCK]
        ours = [n for n in names if "/" not in n and is_export_file(n)]
        others = [n for n in names if n not in ours]
        if mode == "new" and names:
            raise ShardError(
                f"{self.url!r} is not empty; pass --overwrite to replace it "
                "or --resume to continue an interrupted export"
            )
        if others:
            raise ShardError(
                f"{self.url!r} holds objects that are not part of an export (e.g. {others[0]!r}); "
                "refusing to overwrite it"
            )
        self.remote.remove(MANIFEST)  # first: a half-deleted export is never complete
        for n in ours:
            self.remote.remove(n)

    def resume(self, header: Mapping[str, Any], k: int) -> Kept:
        fix = "; rerun the export with --overwrite"
        old = read_json(self.remote, MANIFEST, fix)
        if old is not None:
            check_same_header(old, header)
            for n in self.remote.listing():
                if n == PARTIAL or (is_export_file(n) and not SHARD_RE.match(n) and n != MANIFEST):
                    self.remote.remove(n)  # a stale partial record from a kill while finishing
            return Kept(True, [], [])
        kept = Kept(False, [], [])
        partial = read_json(self.remote, PARTIAL, fix)
        listing = self.remote.listing()
        if partial is None:
            if any(n != LOCK for n in listing):
                raise ShardError(f"{self.url!r} holds no interrupted export to resume")
            return kept
        old_header, records = partial.get("header", partial), partial.get("shards")
        if not isinstance(old_header, dict) or not isinstance(records, list):
            raise ShardError(f"{self.remote.url_of(PARTIAL)!r} is malformed{fix}")
        check_same_header(old_header, header)
        by_name = {r.get("name"): r for r in records if isinstance(r, dict)}
        i = 0
        while (name := shard_name(i)) in listing:
            rec, size = by_name.get(name), int(listing[name]["size"])
            if rec is None or rec.get("bytes") != size or rec.get("batches") != k:
                break  # unrecorded (a kill between upload and record), or the short last shard: written again
            kept.shards.append(ShardInfo(name, k, size, str(rec["sha256"])))
            kept.states.append(rec.get("state"))
            i += 1
        for n in listing:
            m = SHARD_RE.match(n)
            if m and int(m.group(1)) >= i:
                self.remote.remove(n)
        return kept

    def save_partial(self, header: Mapping[str, Any], records: list[dict[str, Any]]) -> None:
        self.remote.write(PARTIAL, json_bytes({"header": dict(header), "shards": [dict(r) for r in records]}))

    def put_shard(self, i: int, pending: list[dict[str, np.ndarray]], header: Mapping[str, Any]) -> ShardInfo:
        return put_shard(self.remote, i, pending, header)

    def commit(self, manifest: dict[str, Any]) -> None:
        commit(self.remote, manifest)  # index.json is the commit point: the export is complete

    def read_manifest(self) -> dict[str, Any]:
        m = read_json(self.remote, MANIFEST, "")
        if m is None:
            raise ShardError(f"{self.remote.url_of(MANIFEST)!r} does not exist")
        return m
