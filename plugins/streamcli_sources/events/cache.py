"""The events source's cache folder: decoded recordings and window indexes, keyed by file identity.

It lives under the video source's cache root (``$STREAMCLI_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamcli``,
else ``~/.cache/streamcli``; or the source's ``cache_dir=``), in an ``events`` subfolder: never next to the
user's files. An entry's name hashes the file's absolute path, size and mtime (and, for an index, the window
options), so an edited file is never served stale. Entries are written under a temporary name and renamed, so
concurrent scans never read a half-written one; a cache that cannot be written only costs a rescan.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from streamcli_sources._scan import cache_dir

VERSION = 1  # bump when a decoded column or an index entry changes meaning
_log = logging.getLogger("streamcli")


def folder(option: str = "") -> Path:
    """The events cache folder for the ``cache_dir`` option (empty: the shared default)."""
    return cache_dir(option) / "events"


def key(path: str, **extra: Any) -> str:
    """A name for ``path`` as it is now (path, size, mtime) plus ``extra`` options."""
    st = os.stat(path)
    ident = {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "v": VERSION, **extra}
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def load_arrays(where: Path, name: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``name``, or ``None`` when absent or unreadable."""
    try:
        with np.load(where / f"{name}.npz") as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):
        return None


def store_arrays(where: Path, name: str, arrays: dict[str, np.ndarray]) -> None:
    """Store ``arrays`` under ``name`` atomically; a failure is logged, not raised."""
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".tmp-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                savez: Any = np.savez  # its stub types keyword arrays badly
                savez(f, **arrays)
            os.replace(tmp, where / f"{name}.npz")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        _log.warning("streamcli: cannot write the events cache in %s: %s", where, exc)


def publish_dir(tmp: Path, final: Path) -> None:
    """Move a finished temporary folder into place; if another process won the race, keep theirs."""
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
