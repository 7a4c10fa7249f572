"""Object storage through fsspec: one URL root, every request retried on transient errors.

``Remote(url)`` names a folder-like prefix (``s3://bucket/run``) and reads, writes, lists and removes the
objects under it. Credentials and endpoints come from where fsspec and the backend look for them (for S3:
``AWS_*`` variables, ``~/.aws``, ``AWS_ENDPOINT_URL``; fsspec's ``FSSPEC_S3_*`` variables and config files);
streamcli never stores them.

Every request goes through ``retries.retry`` (which errors are retried, how often and for how long). For S3 the
retries are streamcli's: botocore tries each request twice, with a 10 s connect timeout, unless
``AWS_MAX_ATTEMPTS`` says otherwise (its own retries, inside each of ours, would multiply the time an outage
takes to fail). A permanent error, or one that outlasts the retries, raises ``StorageError`` naming the URL; a
missing object raises ``FileNotFoundError`` for the caller to name, and an object that a conditional put finds
raises ``FileExistsError``. fsspec is imported only here, and only when a URL is used.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any, TypeVar

from streamcli.errors import StorageError, UnsupportedURLError
from streamcli.storage import urls
from streamcli.storage.retries import NoConditionalPut as NoConditionalPut
from streamcli.storage.retries import describe
from streamcli.storage.retries import retry as retry
from streamcli.storage.retries import transient as transient

T = TypeVar("T")


class Remote:
    """The objects under one URL prefix, read and written through fsspec with retries.

    Holds only the URL: the filesystem object comes from fsspec's instance cache, so a ``Remote`` pickles to
    worker processes as a string would.
    """

    def __init__(self, url: str) -> None:
        urls.check(url)
        self.url = url.rstrip("/")

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url}

    @property
    def fs(self) -> Any:
        return self._fs_and_root()[0]

    def _fs_and_root(self) -> tuple[Any, str]:
        import fsspec

        options: dict[str, Any] = {"use_listings_cache": False}  # others write too: list afresh
        if urls.scheme(self.url) in ("s3", "s3a") and "AWS_MAX_ATTEMPTS" not in os.environ:
            options["config_kwargs"] = {"retries": {"total_max_attempts": 2}, "connect_timeout": 10}
        try:
            fs, root = fsspec.core.url_to_fs(self.url, **options)
        except ImportError as exc:  # a backend that imports its dependencies only when first used
            raise UnsupportedURLError(urls.backend_missing(self.url, exc)) from None
        return fs, root.rstrip("/")

    def path(self, name: str = "") -> str:
        """The backend's path of object ``name`` (``bucket/run/name``)."""
        root = self._fs_and_root()[1]
        return f"{root}/{name}" if name else root

    def url_of(self, name: str) -> str:
        return urls.join(self.url, name) if name else self.url

    def call(self, what: str, name: str, fn: Callable[[Any, str], T]) -> T:
        """``fn(fs, path_of_name)`` with retries; errors name ``url_of(name)``."""
        return retry(lambda: fn(self.fs, self.path(name)), what, self.url_of(name))

    def read(self, name: str) -> bytes:
        return self.call("reading", name, lambda fs, p: bytes(fs.cat_file(p)))

    def read_range(self, name: str, start: int, end: int) -> bytes:
        return self.call("reading", name, lambda fs, p: bytes(fs.cat_file(p, start=start, end=end)))

    def write(self, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Put ``data`` as object ``name`` (atomic: a reader sees all of it or the old one); ``exclusive`` raises
        ``FileExistsError`` if the object exists (a conditional put; ``NoConditionalPut`` where the storage has
        none)."""

        def put(fs: Any, p: str) -> None:
            if not exclusive:
                fs.pipe_file(p, data)
                return
            try:
                fs.pipe_file(p, data, mode="create")
            except TypeError:  # a backend without conditional puts
                raise NoConditionalPut(f"{self.url_of(name)!r}: no conditional put") from None

        try:
            self.call("writing", name, put)
        except FileNotFoundError as exc:  # no bucket: a missing object is the reader's to name, not the writer's
            raise StorageError(f"writing {self.url_of(name)!r} failed: {describe(exc)}") from None

    def upload(self, local: str | os.PathLike[str], name: str) -> None:
        try:
            self.call("uploading", name, lambda fs, p: fs.put_file(os.fspath(local), p))
        except FileNotFoundError as exc:
            raise StorageError(f"uploading to {self.url_of(name)!r} failed: {describe(exc)}") from None

    def size(self, name: str) -> int | None:
        """The size of object ``name``, or None if it does not exist."""
        try:
            info = self.call("looking up", name, lambda fs, p: fs.info(p))
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type", "file") == "file" else None

    def exists(self, name: str = "") -> bool:
        return bool(self.call("looking up", name, lambda fs, p: fs.exists(p)))

    def listing(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Object name (relative to the root) -> fsspec's info, of everything under the root, read afresh."""

        def ls(fs: Any, root: str) -> dict[str, dict[str, Any]]:
            fs.invalidate_cache(root)
            try:
                found = fs.find(root, detail=True, withdirs=False)
            except FileNotFoundError:
                return {}
            return {str(p)[len(root) + 1 :]: dict(i) for p, i in found.items() if str(p).startswith(root + "/")}

        return self.call("listing", prefix, ls)

    def remove(self, name: str) -> None:
        """Delete object ``name``; a missing one is fine."""

        def rm(fs: Any, p: str) -> None:
            try:
                fs.rm_file(p)
            except FileNotFoundError:
                pass

        self.call("removing", name, rm)

    def open(self, name: str, *, buffer: int = 1 << 20) -> io.BufferedReader:
        """Object ``name`` as a seekable binary file whose every ranged read is retried (``FileNotFoundError`` if
        missing)."""
        size = self.size(name)
        if size is None:
            raise FileNotFoundError(self.url_of(name))
        return io.BufferedReader(RangeReader(self, name, size), buffer_size=buffer)


class RangeReader(io.RawIOBase):
    """A seekable raw file over one object: each read is one ranged GET, retried on transient errors."""

    def __init__(self, remote: Remote, name: str, size: int) -> None:
        super().__init__()
        self.remote, self.name, self.size, self.pos = remote, name, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        end = min(self.size, self.pos + len(b))
        if end <= self.pos:
            return 0
        data = self.remote.read_range(self.name, self.pos, end)
        if len(data) != end - self.pos:  # the object changed under us: a short read would corrupt silently
            raise OSError(f"{self.remote.url_of(self.name)!r} changed while it was read")
        memoryview(b)[: len(data)] = data
        self.pos = end
        return len(data)


def split(url: str) -> tuple[Remote, str]:
    """An object's folder as a ``Remote``, and its name: ``s3://b/run/a.txt`` gives ``s3://b/run`` and ``a.txt``."""
    parent, _, name = url.rstrip("/").rpartition("/")
    return Remote(parent), name


def find(url: str, glob: str) -> list[str]:
    """``[url]`` if it is an object, else the URLs of the objects under it whose name matches ``glob``, at any depth
    (as ``Path.rglob``), sorted. Empty if nothing is there."""
    return list(find_sizes(url, glob))


def find_sizes(url: str, glob: str) -> dict[str, int | None]:
    """``find``, with each object's size in bytes (None where the storage gives none), in the same order."""
    import fnmatch

    if "/" in url.split("://", 1)[1].strip("/"):  # below a bucket: it may be one object
        parent, name = split(url)
        size = parent.size(name)
        if size is not None:
            return {url.rstrip("/"): size}
    root = Remote(url)
    found = {
        root.url_of(n): None if info.get("size") is None else int(info["size"])
        for n, info in root.listing().items()
        if fnmatch.fnmatchcase(n.rsplit("/", 1)[-1], glob)
    }
    return dict(sorted(found.items()))
