"""An export at a URL, read as a local one is: the manifest, shards by byte ranges, and ``verify``.

``open_shard_url`` reads a shard's zip directory and then only the members asked for (``only``), each as
ranged reads: the shards source indexes an export from its flags, and then reads the data members, without
fetching the rest. A read of every member (``ShardReader``), or ``check=True`` (its sha256), fetches the whole
shard in one request, which costs fewer round trips than ranges. Every request is retried on transient errors
(``remote``); one that still fails raises ``StorageError`` naming the URL. The checks on hostile input are the
local ones.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.format import (
    LOCK,
    MANIFEST,
    PARTIAL,
    SHARD_RE,
    expected_shapes,
    is_temp_name,
    member_names,
    shard_path,
    validate_manifest,
)
from streamcli.shards.npz import _load_members
from streamcli.storage.lock import busy
from streamcli.storage.remote import Remote
from streamcli.storage.writer import read_json


def load_manifest_url(url: str) -> dict[str, Any]:
    """``load_manifest`` for an export at a URL."""
    remote = Remote(url)
    m = read_json(remote, MANIFEST, "")
    if m is None:
        hint = " (an interrupted export? rerun it with --resume)" if remote.size(PARTIAL) is not None else ""
        raise ShardError(f"{remote.url_of(MANIFEST)!r} does not exist{hint}")
    validate_manifest(m, remote.url, where=repr(remote.url_of(MANIFEST)))
    return m


def open_shard_url(
    url: str,
    m: Mapping[str, Any],
    entry: Mapping[str, Any],
    *,
    check: bool = False,
    only: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """``open_shard`` for an export at a URL: the members are read into memory (nothing to map)."""
    remote = Remote(url)
    name = entry["name"]
    shard_path(remote.url, name)  # a plain file name, or ShardError
    want = expected_shapes(m, int(entry["batches"]))
    if only is not None:
        want = {key: want[key] for key in only}
    try:
        if only is None or check:  # every member (replay, verify): one request for the whole object
            data = remote.read(name)
        else:
            f = remote.open(name)
    except FileNotFoundError:
        raise ShardError(f"shard {name!r} is missing from {remote.url!r}") from None
    if only is not None and not check:
        with f:
            size = f.raw.size  # type: ignore[attr-defined]
            if size != entry["bytes"]:
                raise ShardError(f"shard {name!r} has {size} bytes, the manifest says {entry['bytes']}")
            return _load_members(name, f, want)
    if len(data) != entry["bytes"]:
        raise ShardError(f"shard {name!r} has {len(data)} bytes, the manifest says {entry['bytes']}")
    if check and hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ShardError(f"shard {name!r} is corrupted: its sha256 differs from the manifest")
    return _load_members(name, data, want)


def verify_url(url: str) -> list[str]:
    """``verify`` for an export at a URL: every problem, changing nothing."""
    from streamcli.shards.reader import _stream_problems

    remote = Remote(url)
    holder = busy(remote)
    if holder is not None:
        return [f"an export is writing {remote.url!r} right now ({holder}); verify it once that has finished"]
    try:
        m = load_manifest_url(url)
    except ShardError as exc:
        return [str(exc)]
    problems: list[str] = []
    listed, total = set(), 0
    for entry in m["shards"]:
        name = entry["name"]
        listed.add(name)
        total += int(entry["batches"])
        try:
            arrays = open_shard_url(url, m, entry, check=True)
        except ShardError as exc:
            problems.append(str(exc))
            continue
        problems += _stream_problems(m, name, arrays)
        with remote.open(name) as f, zipfile.ZipFile(f) as zf:
            extra = sorted({n.removesuffix(".npy") for n in zf.namelist()} - set(member_names(m)))
        if extra:
            problems.append(f"shard {name!r} holds unexpected members: {', '.join(extra)}")
    if total != m["batches"]:
        problems.append(f"the shard entries add up to {total} batches, the manifest says {m['batches']}")
    for n in sorted(remote.listing()):
        if n in (MANIFEST, LOCK) or n in listed:
            continue
        kind = "shard" if SHARD_RE.match(n) else "object"
        hint = ""
        if n == PARTIAL or is_temp_name(n):
            hint = " (left by a kill while the export finished; streamcli export ... --resume removes it)"
        problems.append(f"{kind} {n!r} is in {remote.url!r} but not in the manifest{hint}")
    return problems
