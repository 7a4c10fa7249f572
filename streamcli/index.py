"""A source's items and their lengths, written once (``streamcli index``) so start-up lists no storage.

Without an index the main process calls ``items()`` (one listing, or one request per object) and every
``length()`` (a stat, a request or a decode per item) at each start. An index holds both, so a loader of a
million items reads one file instead.

The file's format, and what it holds once read, are ``streamcli.index_format``'s; this module builds an index from
a source, writes it atomically, reads it (locally or from object storage) and finds the one a source or loader uses.

When is an index stale? Listing the data again to compare would cost what the index saves, so the check at start
uses cheap facts only: the plugin and the source's ``index_settings()`` (the options that decide which items there
are and their lengths, e.g. the text source's glob and width) must be the ones the index was written with, and the
file must match its seal (a truncated or altered file, a length edited by hand, is refused, never half used). Each
item's size and modification time (ETag on object storage) are checked where the item is opened
(``index_stamps``): an item changed since is refused there with the rebuild command. Files added since are not
seen, as with any snapshot: rebuild the index after changing the data (the loader's saved states still carry the
items' digest, so a resume never mixes two listings). An index written before the stamps loads with a warning.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from streamcli import index_stamps
from streamcli.declared import checked_length
from streamcli.errors import IndexFileError, PluginLoadError, PluginNotFoundError
from streamcli.index_format import FORMAT, Index, Names, decode, encode, relative_names
from streamcli.plugins import load_factory
from streamcli.source import StreamSource, plugin_name
from streamcli.storage import urls

__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "Index",
    "Names",
    "arrays_of",
    "build",
    "build_stamped",
    "decode",
    "default_location",
    "encode",
    "find",
    "for_loader",
    "info_of",
    "read",
    "relative_names",
    "settings_of",
    "write",
]

INDEX_NAME = ".streamcli-index.npz"


def default_location(path: str | os.PathLike[str]) -> str:
    """Where ``streamcli index`` writes the index of the data at ``path`` by default: inside the folder, or beside
    a local file (one token file holds a whole corpus; a table or an HDF5 file holds many items) as
    ``FILE.streamcli-index.npz``."""
    p = str(path)
    if urls.is_remote(p):
        return urls.join(p, INDEX_NAME)
    local = Path(urls.local_path(p))
    if local.is_file():
        return str(local.with_name(local.name + INDEX_NAME))
    return str(local / INDEX_NAME)


def settings_of(source: StreamSource) -> dict[str, Any]:
    """The source's ``index_settings()`` (the options that decide its items and lengths), or none."""
    fn = getattr(source, "index_settings", None)
    return dict(fn()) if callable(fn) else {}


def info_of(source: StreamSource) -> dict[str, Any]:
    """The source's ``index_info()`` (facts its scan settled that it needs back, e.g. the sample rate), or none."""
    fn = getattr(source, "index_info", None)
    return dict(fn()) if callable(fn) else {}


def arrays_of(source: StreamSource) -> dict[str, np.ndarray]:
    """The source's ``index_arrays()`` (integer arrays its scan settled, e.g. the table source's row order), or none."""
    fn = getattr(source, "index_arrays", None)
    return dict(fn()) if callable(fn) else {}


def build(
    source: StreamSource,
    progress: Callable[[int, int], None] | None = None,
    skip: Callable[[str, Exception], None] | None = None,
) -> tuple[list[str], np.ndarray]:
    """The items and lengths of ``source`` (``build_stamped`` without the stamps)."""
    items, lengths, _ = build_stamped(source, progress, skip)
    return items, lengths


def build_stamped(
    source: StreamSource,
    progress: Callable[[int, int], None] | None = None,
    skip: Callable[[str, Exception], None] | None = None,
    root: str | None = None,
) -> tuple[list[str], np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Ask ``source`` for its items and every length; items must be strings (paths, URLs, names) or the source's
    ``index_key(item)`` must say which string stands for one (``use_index`` turns them back), and the source must
    say which of its settings decide them (``index_settings()``), or a stale index could not be told.

    Lengths come from the source's ``index_length(item)`` where it has one (it may read or decode the item to count
    its steps, which ``length()`` does not), else ``length(item)``. An item whose length fails stops the build
    with its error; with ``skip``, it is left out of the index and ``skip(name, error)`` is told (a loader over the
    index never sees it, as ``on_error="skip"`` would).

    Each item's stamp (``index_stamps``: size and modification mark, from one listing of the URL ``root``) is taken
    before its length, so a file that changes while it is indexed is seen as changed where it is opened."""
    if not callable(getattr(source, "index_settings", None)):
        raise IndexFileError(
            f"the {plugin_name(source)} source cannot be indexed: it has no index_settings() saying which of its "
            "options decide its items and lengths"
        )
    found = list(source.items())
    key = getattr(source, "index_key", None)
    items = [key(i) for i in found] if callable(key) else found
    bad = next((i for i in items if not isinstance(i, str)), None)
    if bad is not None:
        raise IndexFileError(
            f"the {plugin_name(source)} source's items are {type(bad).__name__}, not strings; only a source "
            "whose items are strings (paths, URLs) can be indexed"
        )
    sizes, marks = index_stamps.take(items, root)
    lengths = np.empty(len(items), np.int64)
    kept = np.ones(len(items), bool)
    measure = getattr(source, "index_length", source.length)  # a source may measure what it cannot tell unread
    for k, item in enumerate(found):
        try:
            n = measure(item)
        except Exception as exc:
            if skip is None:
                raise
            skip(items[k], exc)
            kept[k] = False
        else:
            told = checked_length(n, plugin_name(source), items[k])
            lengths[k] = -1 if told is None else told
        if progress is not None and (k % 1024 == 0 or k + 1 == len(items)):
            progress(k + 1, len(items))
    if not kept.all():
        items = [i for i, keep in zip(items, kept.tolist(), strict=True) if keep]
        lengths, sizes, marks = lengths[kept], sizes[kept], marks[kept]
    return items, lengths, (sizes, marks)


def write(where: str, data: bytes) -> None:
    """Write the index file atomically: a reader sees the old file or the new one, never part of one."""
    if urls.is_remote(where):
        from streamcli.storage.remote import split

        remote, name = split(where)
        remote.write(name, data)  # one PUT: an object appears whole or not at all
        return
    target = Path(urls.local_path(where))
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(where: str) -> Index:
    """The index at ``where`` (path or URL); ``IndexFileError`` naming it if it is missing, truncated or not one."""
    found = _read(where, missing_ok=False)
    assert found is not None
    return found


def _read(where: str, *, missing_ok: bool) -> Index | None:
    # One read, no existence check first: on object storage a HEAD that misses may be followed by a listing.
    try:
        if urls.is_remote(where):
            from streamcli.storage.remote import split

            remote, name = split(where)
            if missing_ok and not _s3_object_exists(remote.fs, remote.path(name)):
                return None
            raw: bytes | str = remote.read(name)
        else:
            raw = str(urls.local_path(where))
            if not stat.S_ISREG(os.stat(raw).st_mode):  # a FIFO or a device would block the read, or never end
                raise IndexFileError(f"index {where} is not a regular file; name the .npz file streamcli index wrote")
        return decode(where, raw)
    except (FileNotFoundError, NotADirectoryError):  # the latter: PATH is a file, so no folder holds an index
        if missing_ok:
            return None
        raise IndexFileError(f"no index at {where}; write one with streamcli index SOURCE PATH") from None
    except OSError as exc:  # the read itself failed (a damaged file is ``decode``'s to name)
        raise IndexFileError(
            f"{where} is not a whole streamcli index ({type(exc).__name__}: {exc}); rebuild it with "
            "streamcli index SOURCE PATH"
        ) from exc


def _s3_object_exists(fs: Any, path: str) -> bool:
    """One HEAD request: s3fs's own existence check lists the prefix after a miss (is it a folder?)."""
    if not hasattr(fs, "call_s3") or not hasattr(fs, "split_path"):
        return True  # another store: its read says whether the index is there
    bucket, key, _ = fs.split_path(path)
    try:
        fs.call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        return False
    return True


def find(path: str | os.PathLike[str], index: str | None) -> Index | None:
    """The index a source at ``path`` uses: ``index="auto"`` (or None) the default one if it is there, ``"none"``
    none, anything else the index at that path or URL (which must exist); its items under ``path``."""
    if index == "none":
        return None
    found = _read(default_location(path), missing_ok=True) if index is None or index == "auto" else read(index)
    return None if found is None else found.under(path)


def for_loader(source: StreamSource, index: str | os.PathLike[str] | None) -> Index | None:
    """The index a loader takes its items and lengths from: the one named (checked against ``source``), else the
    one the source found next to its data (its ``streamcli_index``, checked when the source read it), else none.

    A source with ``use_index(index)`` adopts it (what its scan settled comes from the index's ``info``) and
    returns its items in its own form (the video source's tuples); else the index's are used as they are."""
    if index is None:
        idx = getattr(source, "streamcli_index", None)
        if not isinstance(idx, Index):
            return None
    else:
        idx = read(str(index))
        plugin = plugin_name(source)
        if idx.plugin != plugin and _registered_as(source, idx.plugin):
            plugin = idx.plugin  # a source made by its class, not by load_source, has the class's name
        idx.check(plugin, settings_of(source), f"streamcli index {plugin} PATH --out {index}")
    adopt = getattr(source, "use_index", None)
    return replace(idx, items=adopt(idx)) if callable(adopt) else idx


def _registered_as(source: StreamSource, name: str) -> bool:
    """Whether ``name`` is the plugin whose factory is ``source``'s class (``VideoSource`` for ``video``)."""
    try:
        return bool(load_factory(name) is type(source))
    except (PluginNotFoundError, PluginLoadError):
        return False
