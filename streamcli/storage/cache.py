"""A local cache of remote objects, for the sources that need a local file (audio; video's decoders).

One file per object under ``<cache dir>/objects``, named by a hash of its URL, size and ETag (or modification
time), so a changed object is fetched anew. A download goes to a temporary name in the same folder and is
linked into place (never over a file already there, so an entry keeps its inode while it is used), so several
workers and processes can share the cache: a reader sees a whole file or none, and two processes that fetch the
same object at once both end with the same complete file. Using an entry touches its access time; after each
download, entries beyond the size limit are evicted, least recently used first.

An entry in use is *pinned* (``pinned(url)``: a shared ``flock`` on it, which dies with its process) and is never
evicted: the cache may then hold more than its limit, by what is open at once. An object larger than the limit is
refused (``CacheTooSmallError``, naming the limit and ``STREAMCLI_CACHE_BYTES``); a source checks its objects
against the limit before it reads any.

A hit asks the server whether the object changed (one HEAD request), except within ``fresh_s`` seconds
(default 300) of this process's last check of that URL: a source reads each file several times (its header,
then each stream's segments), and that many round trips would cost more than the local read.

The cache dir is ``$STREAMCLI_CACHE_DIR`` or ``$XDG_CACHE_HOME/streamcli`` (default ``~/.cache/streamcli``);
the limit is ``$STREAMCLI_CACHE_BYTES`` (default 10 GB).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamcli.errors import CacheTooSmallError, StorageError
from streamcli.storage.remote import Remote

DEFAULT_LIMIT = 10 * 10**9
_TMP = ".tmp-"


def cache_root() -> Path:
    """``$STREAMCLI_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamcli``, else ``~/.cache/streamcli``."""
    if env := os.environ.get("STREAMCLI_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "streamcli"


def default_limit() -> int:
    try:
        return max(0, int(os.environ.get("STREAMCLI_CACHE_BYTES", DEFAULT_LIMIT)))
    except ValueError:
        return DEFAULT_LIMIT


class Cache:
    """Remote objects as local files, at most ``limit`` bytes of them (plus the entries pinned, and the newest).

    Args:
        folder: where the files live (default ``cache_root() / "objects"``).
        limit: the size limit in bytes (default ``default_limit()``).
    """

    def __init__(
        self, folder: str | os.PathLike[str] | None = None, limit: int | None = None, fresh_s: float = 300.0
    ) -> None:
        self.folder = Path(folder) if folder is not None else cache_root() / "objects"
        self.limit = default_limit() if limit is None else int(limit)
        self.fresh_s = float(fresh_s)
        self._checked: dict[str, tuple[Path, float]] = {}  # url -> (entry, when this process last checked it)

    def entry(self, url: str, info: dict[str, Any]) -> Path:
        """Where the object ``url``, as ``info`` (fsspec's) describes it, is or will be cached."""
        ident = {"url": url, "size": info.get("size"), "tag": str(info.get("ETag") or info.get("mtime") or "")}
        key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:40]
        suffix = "".join(Path(url.rsplit("/", 1)[-1]).suffixes[-1:])[:16]
        return self.folder / (key + suffix)

    def check_fits(self, url: str, size: int | None) -> None:
        """Raise ``CacheTooSmallError`` if an object of ``size`` bytes cannot be cached at all."""
        if size is not None and size > self.limit:
            raise CacheTooSmallError(
                f"{url!r} is {size} bytes, more than the local cache's limit of {self.limit} bytes; raise "
                f"STREAMCLI_CACHE_BYTES to at least {size} (e.g. STREAMCLI_CACHE_BYTES={max(size, 2 * self.limit)}), "
                "or set STREAMCLI_CACHE_DIR to a disk with room"
            )

    def get(self, url: str) -> Path:
        """A local file holding the object at ``url``: from the cache (touched), else downloaded into it.

        The file is not pinned: another process may evict it once it is not the newest; ``pinned`` holds it."""
        path = self._fetch(url)
        self.evict(keep=path)
        return path

    @contextlib.contextmanager
    def pinned(self, url: str) -> Iterator[Path]:
        """The object at ``url`` as a local file that no eviction removes until the block ends."""
        for _ in range(8):
            path = self._fetch(url)
            fd = _pin(path)
            if fd is not None:
                break
            self._checked.pop(url, None)  # evicted between the fetch and the pin: fetch it again
        else:
            raise StorageError(f"{url!r}: its cache entry in {str(self.folder)!r} keeps being evicted; rerun")
        try:
            self.evict(keep=path)
            yield path
        finally:
            os.close(fd)  # the pin goes with its descriptor
            with contextlib.suppress(OSError):
                self.evict()  # what the pin held over the limit goes now, least recently used first

    def _fetch(self, url: str) -> Path:
        known = self._checked.get(url)
        if known is not None and time.monotonic() - known[1] < self.fresh_s:
            try:
                _touch(known[0])  # a hit checked lately: now the most recently used
                return known[0]
            except FileNotFoundError:
                pass  # evicted (by another process): fetch it again
        remote = Remote(url.rsplit("/", 1)[0])
        name = url.rsplit("/", 1)[1]
        info = remote.call("looking up", name, lambda fs, p: fs.info(p))
        self.check_fits(url, info.get("size"))
        path = self.entry(url, info)
        try:
            _touch(path)  # a hit: now the most recently used
            self._checked[url] = (path, time.monotonic())
            return path
        except FileNotFoundError:
            pass
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=_TMP)
        os.close(fd)
        try:
            remote.call("downloading", name, lambda fs, p: fs.get_file(p, tmp))
            with contextlib.suppress(FileExistsError):  # another process's copy is there: the same bytes, kept
                os.link(tmp, path)
            self._checked[url] = (path, time.monotonic())
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return path

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least recently used entries until the cache fits its limit; return what was removed.

        Evictions are serialised by a lock file, so two processes never count the same files twice; a
        process's own temporary downloads are never touched, nor is an entry pinned (``pinned``) anywhere.
        """
        removed: list[Path] = []
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = []
            for p in self.folder.iterdir():
                if p.name.startswith(".") or p == keep:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = p.stat()
                    entries.append((st.st_atime_ns, st.st_size, p))
            total = sum(e[1] for e in entries) + (keep.stat().st_size if keep is not None and keep.exists() else 0)
            for _, size, p in sorted(entries, key=lambda e: (e[0], e[2].name)):
                if total <= self.limit:
                    break
                if _remove_unpinned(p):
                    removed.append(p)
                    total -= size
        return removed

    def nbytes(self) -> int:
        """The bytes the cache holds now."""
        if not self.folder.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.folder.iterdir() if not p.name.startswith("."))


def _touch(path: Path) -> None:
    """Mark ``path`` used now: its access time (the modification time stays, so a scan keyed on it stays valid)."""
    st = path.stat()
    os.utime(path, ns=(time.time_ns(), st.st_mtime_ns))


def _pin(path: Path) -> int | None:
    """A descriptor holding a shared lock on ``path``'s entry, or None if it was evicted meanwhile."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while an eviction holds it, which then removes it
        if os.stat(path).st_ino == os.fstat(fd).st_ino:
            return fd
    except FileNotFoundError:
        pass
    os.close(fd)
    return None


def _remove_unpinned(path: Path) -> bool:
    """Remove ``path`` unless a process has it pinned; whether it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # in use
        path.unlink(missing_ok=True)  # under the exclusive lock: a pin that waited sees it gone
        return True
    finally:
        os.close(fd)


_DEFAULT: Cache | None = None


def default() -> Cache:
    """This process's default cache (a new one if the environment names another folder or limit)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT.folder != cache_root() / "objects" or _DEFAULT.limit != default_limit():
        _DEFAULT = Cache()
    return _DEFAULT


def fetch(url: str) -> Path:
    """``url`` as a local file through this process's default cache (not pinned: see ``Cache.pinned``)."""
    return default().get(url)
