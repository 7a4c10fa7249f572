"""What an indexed length depends on: each item's size and modification mark, taken when the index is written and
checked where the item is opened.

A length in an index is only as good as the file it was measured on. An item that is a file (a local path) or an
object (a URL) is stamped with its size and, locally, its modification time in nanoseconds; on object storage,
a number drawn from its ETag (an object written again has another one), as the listing gives them. An item that
is neither (a literal string, a name the source resolves itself) is not stamped: its entries are -1.

The check is made by the producer that opens the item (``fills``), one ``stat`` or one HEAD per item and process,
so a loader's start still lists nothing: a stream is never cut at a length the data contradicts. A changed item
raises ``StaleIndexError`` naming it, what changed and the command that rebuilds the index.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.errors import StaleIndexError
from streamcli.storage import urls

NONE = -1  # not stamped: the item is not a file or an object (or it was not there when the index was written)


def _mark_of_info(info: Any) -> int:
    """An object's modification mark from fsspec's info: its ETag (or, failing one, its time) as an int64."""
    for key in ("ETag", "etag", "md5Hash", "LastModified", "mtime", "updated"):
        value = info.get(key)
        if value is not None:
            digest = hashlib.sha256(str(value).strip('"').encode()).hexdigest()
            return int(digest[:15], 16)  # 60 bits: a non-negative int64
    return NONE


def local(name: str) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of the local file ``name``, or None if it is not one."""
    try:
        st = os.stat(urls.local_path(name))
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def remote(name: str) -> tuple[int, int] | None:
    """``(size, mark)`` of the object at URL ``name`` (one HEAD), or None if there is none."""
    from streamcli.storage.remote import split

    parent, key = split(name)
    try:
        info = parent.call("looking up", key, lambda fs, p: fs.info(p))
    except FileNotFoundError:
        return None
    if info.get("type", "file") != "file" or info.get("size") is None:
        return None
    return int(info["size"]), _mark_of_info(info)


def of(name: str) -> tuple[int, int] | None:
    """The item's stamp as it is now, or None where it is not a file or an object."""
    return remote(name) if urls.is_remote(name) else local(name)


def take(names: Sequence[str], root: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``sizes`` and ``marks`` of ``names`` (int64, -1 where not stamped). Objects under the URL ``root`` are
    stamped from one listing of it; others one at a time."""
    sizes = np.full(len(names), NONE, np.int64)
    marks = np.full(len(names), NONE, np.int64)
    listed: dict[str, Any] = {}
    if root is not None and urls.is_remote(root) and any(urls.is_remote(n) for n in names):
        from streamcli.storage.remote import Remote

        there = Remote(root)
        listed = {there.url_of(k): info for k, info in there.listing().items()}
    for k, name in enumerate(names):
        info = listed.get(name)
        if info is not None and info.get("size") is not None:
            found: tuple[int, int] | None = (int(info["size"]), _mark_of_info(info))
        else:
            found = of(name)
        if found is not None:
            sizes[k], marks[k] = found
    return sizes, marks


@dataclass
class Stamps:
    """An index's stamps, as a producer checks them: ``names[k]`` had ``sizes[k]`` bytes and mark ``marks[k]``
    when index ``where`` was written; ``rebuild`` is the command that writes a fresh one. Picklable."""

    where: str
    rebuild: str
    names: Sequence[str]
    sizes: np.ndarray
    marks: np.ndarray
    _seen: set[int] = field(default_factory=set, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_seen": set()}  # each process checks what it opens

    def check(self, k: int) -> None:
        """Raise ``StaleIndexError`` if item ``k`` is not the file or object it was when the index was written."""
        if k in self._seen or not 0 <= k < len(self.sizes) or self.sizes[k] < 0:
            return
        name = self.names[k]
        now = of(name)
        size, mark = int(self.sizes[k]), int(self.marks[k])
        if now is None:
            why = "is gone"
        elif now[0] != size:
            why = f"changed: {now[0]} bytes now, {size} when the index was written"
        elif mark != NONE and now[1] != mark:
            why = "changed: same size, but modified since the index was written"
        else:
            self._seen.add(k)
            return
        raise StaleIndexError(
            f"index {self.where} is stale: item {name!r} {why}, so its length there is not its length now; "
            f"rebuild it with {self.rebuild}"
        )
