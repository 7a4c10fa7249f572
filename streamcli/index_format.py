"""The index file's format: its bytes (``encode``, ``decode``) and what they hold once read (``Index``, ``Names``).

An ``.npz`` (``numpy.load``, no pickle): ``names`` is the items' UTF-8 text joined by NUL (a path holds no NUL; one
blob loads in one read and one split, where a fixed-width string array would pad every name to the longest),
``lengths`` int64 (-1: unknown), ``sizes`` and ``marks`` int64, what each length depends on (``index_stamps``), and
``meta`` the JSON header: format, plugin, settings, count, digest, creation time, ``info``, what the source's scan
settled that it needs back without one (the audio source's sample rate, the events source's sensor size), arrays
``x.NAME`` int64 that the source's ``index_arrays()`` gives for the same purpose (the table source's row order), and
``seal``, the sha256 of the header and every array: a length edited by hand is refused, not trusted. Where every item
lies under the indexed folder, the names are relative to it and ``meta`` holds the folder's ``root`` as it was: a
source puts its own folder before each name (``Index.under``), so the data and its index move together; a name that
climbs out of the folder (``..``, an absolute path) is refused. Where to find, write and check an index is
``streamcli.index``'s part.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np

from streamcli.errors import IndexFileError, StaleIndexError
from streamcli.index_stamps import NONE, Stamps
from streamcli.storage import urls

FORMAT = 1
ARRAYS = ("names", "lengths", "sizes", "marks")  # what the seal covers, with the header and the sources' arrays
EXTRA = "x."  # the prefix of a source's own arrays (``index_arrays()``)


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
    stamps: Stamps | None = None  # what each length depends on; None: an index written before they existed
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # the source's ``index_arrays()``, by name

    def under(self, path: str | os.PathLike[str]) -> Index:
        """The index with its items under the data's folder or URL ``path`` as the source is given it now (the
        folder may have moved, or be named from another working directory since the index was written)."""
        if not self.relative or not isinstance(self.items, Names):
            return self
        items = self.items.under(_folder_prefix(str(path)))
        stamps = None if self.stamps is None else replace(self.stamps, names=items)
        return replace(self, items=items, stamps=stamps)

    def length_list(self) -> list[int | None]:
        return [None if n < 0 else n for n in self.lengths.tolist()]

    def check(self, plugin: str, settings: Mapping[str, Any], rebuild: str) -> None:
        """Raise ``StaleIndexError`` unless the index was written by ``plugin`` with ``settings``; ``rebuild``
        is the command that writes a fresh one (named in the message); a setting it names already (a file whose
        settings hold its digest, say) is not added again."""
        ours = json.loads(json.dumps(dict(settings), default=str))
        if self.plugin != plugin:
            why = f"it was written by the {self.plugin!r} source, not {plugin!r}"
        elif self.settings != ours:
            keys = sorted(k for k in set(self.settings) | set(ours) if self.settings.get(k) != ours.get(k))
            diff = "; ".join(f"{k}: {self.settings.get(k)!r} there, {ours.get(k)!r} here" for k in keys)
            why = f"it was written with other settings ({diff})"
            rebuild += "".join(f" -s {k}={ours[k]}" for k in keys if k in ours and f" -s {k}=" not in rebuild)
        else:
            if self.stamps is None:
                warnings.warn(
                    f"index {self.where} has no fingerprint of its items (an older streamcli wrote it): its lengths "
                    f"are trusted without a check that the files are the ones measured; rebuild it with {rebuild}",
                    UserWarning,
                    stacklevel=3,
                )
            else:
                self.stamps.rebuild = rebuild  # the caller's command, which names the data as it is given now
            return
        raise StaleIndexError(f"index {self.where} is stale: {why}; rebuild it with {rebuild}")


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


def names_digest(blob: bytes | np.ndarray) -> str:
    """The digest of the names' blob recorded in the header (``digest``)."""
    data = blob if isinstance(blob, bytes) else blob.data  # an array's buffer, not a copy
    return hashlib.sha256(data).hexdigest()[:32]


def seal_of(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> str:
    """The sha256 of the header (its ``seal`` left out), of every array of ``ARRAYS`` there is and of the source's
    ``x.`` arrays (none in an index written before they existed: its seal is unchanged)."""
    h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != "seal"}, sort_keys=True).encode())
    for key in (*ARRAYS, *sorted(k for k in arrays if k.startswith(EXTRA))):
        if key in arrays:
            a = np.ascontiguousarray(arrays[key], np.uint8 if key == "names" else np.int64)
            h.update(f"|{key}|{len(a)}|".encode())
            h.update(a.data)
    return "sha256:" + h.hexdigest()


def _climbing(names: np.ndarray, ends: np.ndarray) -> str | None:
    """The first relative name that climbs out of its folder (``..``) or is absolute, or None. Only a blob that
    holds ``..`` or a name starting with ``/`` is read name by name."""
    starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
    absolute = bool(len(starts)) and bool((names[starts[starts < len(names)]] == ord("/")).any())
    if not absolute and b".." not in names.tobytes():
        return None
    for name in names.tobytes().decode("utf-8", "surrogatepass").split("\0"):
        if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
            return name
    return None


def encode(
    plugin: str,
    settings: Mapping[str, Any],
    items: Sequence[str],
    lengths: np.ndarray,
    info: Mapping[str, Any] | None = None,
    root: str | None = None,
    stamps: tuple[np.ndarray, np.ndarray] | None = None,
    extra: Mapping[str, np.ndarray] | None = None,
) -> bytes:
    """The index file's bytes; ``info``: the source's ``index_info()`` (JSON). With ``root``, the folder or URL
    the items were listed under, the names are written relative to it where every item is under it, so that the
    data and its index can move together (the source puts its own folder back before each name, ``find``).
    ``stamps``: each item's size and mark (``index_stamps.take``), checked where the item is opened. ``extra``: the
    source's ``index_arrays()``, integer arrays it needs back (stored as int64 ``x.NAME``)."""
    names = None if root is None or not items else relative_names(items, root)
    blob = "\0".join(items if names is None else names).encode("utf-8", "surrogatepass")
    meta = {
        "format": FORMAT,
        "plugin": plugin,
        "settings": json.loads(json.dumps(dict(settings), default=str)),
        "count": len(items),
        "digest": names_digest(blob),
        "created": time.time(),
        "info": json.loads(json.dumps(dict(info or {}), default=str)),
    }
    if names is not None:  # where they were: the items of a loader given the index but not the folder
        assert root is not None
        meta["root"] = root if urls.is_remote(root) else os.path.abspath(root)
    none = np.full(len(items), NONE, np.int64)
    sizes, marks = (none, none) if stamps is None else stamps
    arrays: dict[str, np.ndarray] = {
        "names": np.frombuffer(blob, np.uint8),
        "lengths": np.asarray(lengths, np.int64),
        "sizes": np.asarray(sizes, np.int64),
        "marks": np.asarray(marks, np.int64),
    }
    arrays |= {EXTRA + k: np.asarray(v, np.int64) for k, v in (extra or {}).items()}
    meta["seal"] = seal_of(meta, arrays)
    buf = io.BytesIO()
    members: dict[str, Any] = {**arrays, "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    np.savez_compressed(buf, **members)
    return buf.getvalue()


def decode(where: str, raw: bytes | str) -> Index:
    """The index in ``raw`` (the file's bytes, or its local path) read from ``where``; ``IndexFileError`` naming it if
    it is truncated, altered or not one. ``FileNotFoundError`` passes through (the caller says what is missing)."""
    try:
        with np.load(io.BytesIO(raw) if isinstance(raw, bytes) else raw, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            names = z["names"]
            lengths = np.asarray(z["lengths"], np.int64)
            arrays = {k: z[k] for k in z.files if k in ARRAYS or k.startswith(EXTRA)}
    except (FileNotFoundError, NotADirectoryError):
        raise
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
    if names_digest(names) != meta["digest"] or len(items) != meta["count"] or len(lengths) != meta["count"]:
        raise IndexFileError(f"{where} is damaged (its names or lengths disagree with its header); rebuild it")
    plugin, settings, created = str(meta["plugin"]), dict(meta["settings"]), float(meta["created"])
    rebuild = f"streamcli index {plugin} {root or 'PATH'}" + ("" if root is not None else f" --out {where}")
    if "seal" in meta and meta["seal"] != seal_of(meta, arrays):
        raise IndexFileError(
            f"index {where} was changed after it was written (its seal, the sha256 of its header, names, lengths "
            f"and stamps, does not match them): its lengths cannot be trusted; rebuild it with {rebuild}"
        )
    climbing = None if root is None else _climbing(names, ends)
    if climbing is not None:
        raise IndexFileError(
            f"index {where} names {climbing!r}, outside the indexed folder {root}: an index lists only files under "
            f"its folder; rebuild it with {rebuild}"
        )
    stamps = None
    if "seal" in meta and "sizes" in arrays and "marks" in arrays:  # (absent from indexes written before 2026-12)
        sizes, marks = (np.asarray(arrays[k], np.int64) for k in ("sizes", "marks"))
        if len(sizes) != len(items) or len(marks) != len(items):
            raise IndexFileError(f"{where} is damaged (its stamps disagree with its header); rebuild it")
        stamps = Stamps(where, rebuild, items, sizes, marks)
    info = dict(meta.get("info") or {})  # absent from indexes written before sources had index_info()
    extra = {k.removeprefix(EXTRA): np.asarray(a, np.int64) for k, a in arrays.items() if k.startswith(EXTRA)}
    return Index(
        where, plugin, settings, items, lengths, created, info, relative=root is not None, stamps=stamps, arrays=extra
    )
