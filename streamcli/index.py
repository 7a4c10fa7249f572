"""A source's items and their lengths, written once (``streamcli index``) so start-up lists no storage.

Without an index the main process calls ``items()`` (one listing, or one request per object) and every
``length()`` (a stat, a request or a decode per item) at each start. An index holds both, so a loader of a
million items reads one file instead.

The file is an ``.npz`` (``numpy.load``, no pickle): ``names`` is the items' UTF-8 text joined by NUL (a path
holds no NUL; one blob loads in one read and one split, where a fixed-width string array would pad every name
to the longest), ``lengths`` int64 (-1: unknown) and ``meta`` the JSON header: format, plugin, settings, count,
digest, creation time and ``info``, what the source's scan settled that it needs back without one (the audio
source's sample rate, the events source's sensor size). Where every item lies under the indexed folder, the names
are relative to it and ``meta`` holds the folder's ``root`` as it was: a source puts its own folder before each
name (``find``), so the data and its index move together.

When is an index stale? Listing the data again to compare would cost what the index saves, so the check uses
cheap facts only: the plugin and the source's ``index_settings()`` (the options that decide which items there
are and their lengths, e.g. the text source's glob and width) must be the ones the index was written with, and
the names must match the digest and count recorded (a truncated or altered file is refused, never half used).
Files added or removed since are not seen, as with any snapshot: rebuild the index after changing the data
(the loader's saved states still carry the items' digest, so a resume never mixes two listings).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import numpy as np

from streamcli.errors import IndexFileError, PluginLoadError, PluginNotFoundError, StaleIndexError
from streamcli.plugins import load_factory
from streamcli.source import StreamSource, plugin_name
from streamcli.storage import urls

INDEX_NAME = ".streamcli-index.npz"
FORMAT = 1


class Names(Sequence[str]):
    """The items as read: one UTF-8 blob and the offset of each name, decoded when asked. A list of a million
    ``str`` objects would take several times the memory, and pickles to each worker at that size."""

    def __init__(self, blob: np.ndarray, ends: np.ndarray, prefix: str = "") -> None:
        self._blob = blob  # uint8
        self._ends = ends  # int64: where each name ends (its NUL, or the blob's end)
        self._prefix = prefix  # put before each name: the data's folder, where the names are relative to it

    def under(self, prefix: str) -> Names:
        """The same names, each after ``prefix`` (the folder or URL they are relative to, with its separator)."""
        return Names(self._blob, self._ends, prefix)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, k: int) -> str: ...
    @overload
    def __getitem__(self, k: slice) -> list[str]: ...
    def __getitem__(self, k: int | slice) -> str | list[str]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        n = len(self._ends)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        start = int(self._ends[k - 1]) + 1 if k else 0
        return self._prefix + self._blob[start : int(self._ends[k])].tobytes().decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        names = self._blob.tobytes().decode("utf-8", "surrogatepass").split("\0") if len(self) else []
        p = self._prefix
        return iter([p + n for n in names] if p else names)


@dataclass(frozen=True)
class Index:
    """An index as read: where it is, who wrote it with which settings, the items and their lengths."""

    where: str
    plugin: str
    settings: dict[str, Any]
    items: Sequence[str]
    lengths: np.ndarray  # int64, -1 where the source could not tell
    created: float
    info: dict[str, Any] = field(default_factory=dict)  # the source's ``index_info()``: what its scan settled
    relative: bool = False  # the names are relative to the indexed folder (``under``)

    def under(self, path: str | os.PathLike[str]) -> Index:
        """The index with its items under the data's folder or URL ``path`` as the source is given it now (the
        folder may have moved, or be named from another working directory since the index was written)."""
        if not self.relative or not isinstance(self.items, Names):
            return self
        return replace(self, items=self.items.under(_folder_prefix(str(path))))

    def length_list(self) -> list[int | None]:
        return [None if n < 0 else n for n in self.lengths.tolist()]

    def check(self, plugin: str, settings: Mapping[str, Any], rebuild: str) -> None:
        """Raise ``StaleIndexError`` unless the index was written by ``plugin`` with ``settings``; ``rebuild``
        is the command that writes a fresh one (named in the message)."""
        ours = json.loads(json.dumps(dict(settings), default=str))
        if self.plugin != plugin:
            why = f"it was written by the {self.plugin!r} source, not {plugin!r}"
        elif self.settings != ours:
            keys = sorted(k for k in set(self.settings) | set(ours) if self.settings.get(k) != ours.get(k))
            diff = "; ".join(f"{k}: {self.settings.get(k)!r} there, {ours.get(k)!r} here" for k in keys)
            why = f"it was written with other settings ({diff})"
            rebuild += "".join(f" -s {k}={ours[k]}" for k in keys if k in ours)
        else:
            return
        raise StaleIndexError(f"index {self.where} is stale: {why}; rebuild it with {rebuild}")


def default_location(path: str | os.PathLike[str]) -> str:
    """Where ``streamcli index`` writes the index of the data at ``path`` by default: inside the folder."""
    p = str(path)
    if urls.is_remote(p):
        return urls.join(p, INDEX_NAME)
    return str(Path(urls.local_path(p)) / INDEX_NAME)


def settings_of(source: StreamSource) -> dict[str, Any]:
    """The source's ``index_settings()`` (the options that decide its items and lengths), or none."""
    fn = getattr(source, "index_settings", None)
    return dict(fn()) if callable(fn) else {}


def info_of(source: StreamSource) -> dict[str, Any]:
    """The source's ``index_info()`` (facts its scan settled that it needs back, e.g. the sample rate), or none."""
    fn = getattr(source, "index_info", None)
    return dict(fn()) if callable(fn) else {}


def build(
    source: StreamSource,
    progress: Callable[[int, int], None] | None = None,
    skip: Callable[[str, Exception], None] | None = None,
) -> tuple[list[str], np.ndarray]:
    """Ask ``source`` for its items and every length; items must be strings (paths, URLs, names) or the source's
    ``index_key(item)`` must say which string stands for one (``use_index`` turns them back), and the source must
    say which of its settings decide them (``index_settings()``), or a stale index could not be told.

    An item whose ``length()`` fails stops the build with its error; with ``skip``, it is left out of the index
    and ``skip(name, error)`` is told (a loader over the index never sees it, as ``on_error="skip"`` would)."""
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
    lengths = np.empty(len(items), np.int64)
    kept = np.ones(len(items), bool)
    for k, item in enumerate(found):
        try:
            n = source.length(item)
        except Exception as exc:
            if skip is None:
                raise
            skip(items[k], exc)
            kept[k] = False
        else:
            lengths[k] = -1 if n is None else int(n)
        if progress is not None and (k % 1024 == 0 or k + 1 == len(items)):
            progress(k + 1, len(items))
    if not kept.all():
        items = [i for i, keep in zip(items, kept.tolist(), strict=True) if keep]
        lengths = lengths[kept]
    return items, lengths


def _folder_prefix(path: str) -> str:
    """``path`` (a folder or its URL) as the start of the names under it: with one trailing separator."""
    return path.rstrip("/") + "/" if urls.is_remote(path) else os.path.join(path, "")


def relative_names(items: Sequence[str], root: str) -> list[str] | None:
    """``items`` relative to the folder or URL ``root`` they were listed under, or None if one is not under it (a
    source may list items elsewhere: those are written as they are). Local items are matched as the source wrote
    them, from ``root`` as given, normalized, or made absolute."""
    if urls.is_remote(root):
        prefixes = [_folder_prefix(root)]
    else:
        prefixes = list(dict.fromkeys(_folder_prefix(r) for r in (root, os.path.normpath(root), os.path.abspath(root))))
    for prefix in prefixes:
        if all(i.startswith(prefix) and len(i) > len(prefix) for i in items):
            return [i[len(prefix) :] for i in items]
    return None


def _digest(blob: bytes | np.ndarray) -> str:
    data = blob if isinstance(blob, bytes) else blob.data  # an array's buffer, not a copy
    return hashlib.sha256(data).hexdigest()[:32]


def encode(
    plugin: str,
    settings: Mapping[str, Any],
    items: Sequence[str],
    lengths: np.ndarray,
    info: Mapping[str, Any] | None = None,
    root: str | None = None,
) -> bytes:
    """The index file's bytes; ``info``: the source's ``index_info()`` (JSON). With ``root``, the folder or URL
    the items were listed under, the names are written relative to it where every item is under it, so that the
    data and its index can move together (the source puts its own folder back before each name, ``find``)."""
    names = None if root is None or not items else relative_names(items, root)
    blob = "\0".join(items if names is None else names).encode("utf-8", "surrogatepass")
    meta = {
        "format": FORMAT,
        "plugin": plugin,
        "settings": json.loads(json.dumps(dict(settings), default=str)),
        "count": len(items),
        "digest": _digest(blob),
        "created": time.time(),
        "info": json.loads(json.dumps(dict(info or {}), default=str)),
    }
    if names is not None:  # where they were: the items of a loader given the index but not the folder
        assert root is not None
        meta["root"] = root if urls.is_remote(root) else os.path.abspath(root)
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        names=np.frombuffer(blob, np.uint8),
        lengths=np.asarray(lengths, np.int64),
        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
    )
    return buf.getvalue()


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
        with np.load(io.BytesIO(raw) if isinstance(raw, bytes) else raw, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            names = z["names"]
            lengths = np.asarray(z["lengths"], np.int64)
    except (FileNotFoundError, NotADirectoryError):  # the latter: PATH is a file, so no folder holds an index
        if missing_ok:
            return None
        raise IndexFileError(f"no index at {where}; write one with streamcli index SOURCE PATH") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise IndexFileError(
            f"{where} is not a whole streamcli index ({type(exc).__name__}: {exc}); rebuild it with "
            "streamcli index SOURCE PATH"
        ) from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IndexFileError(f"{where} is not a streamcli index of format {FORMAT}; rebuild it with streamcli index")
    ends = np.flatnonzero(names == 0) if meta["count"] else np.zeros(0, np.int64)
    if meta["count"]:
        ends = np.append(ends, len(names)).astype(np.int64)
    root = meta.get("root")  # absent where the names are whole paths (and from indexes written before 2026-11-29)
    items = Names(names, ends, "" if root is None else _folder_prefix(str(root)))
    if _digest(names) != meta["digest"] or len(items) != meta["count"] or len(lengths) != meta["count"]:
        raise IndexFileError(f"{where} is damaged (its names or lengths disagree with its header); rebuild it")
    info = dict(meta.get("info") or {})  # absent from indexes written before sources had index_info()
    plugin, settings, created = str(meta["plugin"]), dict(meta["settings"]), float(meta["created"])
    return Index(where, plugin, settings, items, lengths, created, info, relative=root is not None)


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
