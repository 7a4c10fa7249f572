"""Local path or URL: the one place that tells them apart, without importing fsspec.

A target is a URL when it starts with ``scheme://``. ``file://`` URLs are local paths and go the local way;
every other scheme is served by fsspec, if it and the scheme's backend are installed, and is an
``UnsupportedURLError`` naming the URL and the fix otherwise: never a local folder called ``s3:``.
"""

from __future__ import annotations

import importlib.util
import os
import re
from urllib.parse import unquote, urlsplit

from streamcli.errors import UnsupportedURLError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

# scheme -> (module fsspec needs for it, how to install it); other schemes fall back to fsspec's own registry.
_BACKENDS = {
    "s3": ("s3fs", "pip install 'streamcli[s3]'"),
    "s3a": ("s3fs", "pip install 'streamcli[s3]'"),
    "gs": ("gcsfs", "pip install fsspec gcsfs"),
    "gcs": ("gcsfs", "pip install fsspec gcsfs"),
    "az": ("adlfs", "pip install fsspec adlfs"),
    "abfs": ("adlfs", "pip install fsspec adlfs"),
    "http": ("aiohttp", "pip install fsspec aiohttp"),
    "https": ("aiohttp", "pip install fsspec aiohttp"),
    "hdfs": ("pyarrow", "pip install fsspec pyarrow (and Hadoop's native libraries)"),
}


def scheme(target: object) -> str | None:
    """The URL scheme of ``target`` in lower case, or None for a local path (``file://`` gives ``"file"``)."""
    if not isinstance(target, str):
        return None
    m = _URL.match(target)
    return m.group(1).lower() if m else None


def is_remote(target: object) -> bool:
    """Whether ``target`` is a URL that fsspec must serve (any ``scheme://`` but ``file://``)."""
    s = scheme(target)
    return s is not None and s != "file"


def local_path(target: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """``file:///data/run`` as ``/data/run``; anything else unchanged."""
    if scheme(target) != "file":
        return target
    parts = urlsplit(str(target))
    if parts.netloc not in ("", "localhost"):
        raise UnsupportedURLError(f"{target!r} names host {parts.netloc!r}; file:// URLs must be local (file:///path)")
    return unquote(parts.path)


def check(url: str) -> None:
    """Raise ``UnsupportedURLError`` unless fsspec and the backend of ``url``'s scheme can be imported."""
    s = scheme(url)
    if s is None or s == "file":
        return
    backend, fix = _BACKENDS.get(s, ("", f"pip install fsspec and the fsspec backend for {s}://"))
    if importlib.util.find_spec("fsspec") is None:
        fix = fix if s in _BACKENDS else "pip install 'streamcli[s3]' (fsspec), plus the backend for the scheme"
        raise UnsupportedURLError(f"cannot use {url!r}: URLs need fsspec, which is not installed; {fix}")
    from fsspec.registry import known_implementations, registry

    if s not in known_implementations and s not in registry:
        raise UnsupportedURLError(
            f"cannot use {url!r}: fsspec knows no storage called {s!r}; use a local path or a URL such as "
            "s3://bucket/path, gs://, az://, https:// or file://"
        )
    if backend and importlib.util.find_spec(backend) is None:
        raise UnsupportedURLError(f"cannot use {url!r}: {s}:// needs {backend}, which is not installed; {fix}")
    from fsspec import get_filesystem_class

    try:  # imports the backend: any scheme's missing package is named here, not as a ModuleNotFoundError later
        get_filesystem_class(s)
    except ImportError as exc:
        raise UnsupportedURLError(backend_missing(url, exc)) from None


def backend_missing(url: str, exc: ImportError) -> str:
    """The message for a URL whose fsspec backend failed to import with ``exc``: what is missing and the pip line."""
    s = scheme(url) or ""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ModuleNotFoundError):  # fsspec re-raises it with its own words
        cause = cause.__cause__ or cause.__context__
    missing = cause.name if isinstance(cause, ModuleNotFoundError) else None
    if s in _BACKENDS:
        fix = _BACKENDS[s][1]
    elif missing:
        fix = f"pip install fsspec {missing.split('.')[0]}"
        if exc is not cause:  # fsspec's own words name the package to install where its module differs
            fix += f" ({' '.join(str(exc).split())[:200]})"
    else:
        fix = f"install what fsspec names ({' '.join(str(exc).split())[:200]}) with pip"
    what = f"{missing.split('.')[0]}, which is not installed" if missing else "a package that does not import"
    return f"cannot use {url!r}: {s}:// needs {what}; {fix}"


def join(url: str, *names: str) -> str:
    """``url`` with ``names`` appended, one slash between each."""
    return "/".join([url.rstrip("/"), *names])


def name(url: str) -> str:
    """The last part of a URL's path (``run`` for ``s3://bkt/run/``)."""
    return url.rstrip("/").rsplit("/", 1)[-1]
