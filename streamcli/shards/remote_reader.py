"""An export at a URL, read as a local one is: the manifest, and shards by byte ranges (``reader`` picks these
for a URL, and verifies an export there with them).

``open_shard_url`` reads a shard's zip directory and then only the members asked for (``only``), each as
ranged reads (a zstd member, a stored frame, is one range): the shards source indexes an export from its flags,
and then reads the data members, without fetching the rest. A read of every member (``ShardReader``), or
``check=True`` (its sha256), fetches the whole shard in one request, which costs fewer round trips than ranges.
Every request is retried on transient errors (``streamcli.storage.remote``); one that still fails raises
``StorageError`` naming the URL. The checks on hostile input are the local ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.codec import Codec
from streamcli.shards.format import (
    MANIFEST,
    PARTIAL,
    expected_shapes,
    shard_path,
    validate_manifest,
)
from streamcli.shards.npz import load_codec_members
from streamcli.storage.remote import Remote


def read_json(remote: Remote, name: str, fix: str) -> dict[str, Any] | None:
    """Object ``name`` parsed as a JSON object, None if absent, ``ShardError`` naming it if malformed."""
    try:
        obj = json.loads(remote.read(name))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ShardError(f"{remote.url_of(name)!r} is not valid JSON ({exc}){fix}") from None
    if not isinstance(obj, dict):
        raise ShardError(f"{remote.url_of(name)!r} must hold a JSON object{fix}")
    return obj


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
            return load_codec_members(name, f, Codec.of(m), want)
    if len(data) != entry["bytes"]:
        raise ShardError(f"shard {name!r} has {len(data)} bytes, the manifest says {entry['bytes']}")
    if check and hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ShardError(f"shard {name!r} is corrupted: its sha256 differs from the manifest")
    return load_codec_members(name, data, Codec.of(m), want)
