"""The events source's cache folder: decoded recordings and window indexes, keyed by file identity.

It lives under the video source's cache root (``$STREAMCLI_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamcli``,
else ``~/.cache/streamcli``; or the source's ``cache_dir=``), in an ``events`` subfolder: never next to the
user's files. An entry's name hashes the file's absolute path, inode, size, mtime and ctime (and, for an index,
the window options): an edit that keeps the size and puts the mtime back still changes the ctime, so an edited
file is never served stale. Entries are written under a temporary name and renamed, so a concurrent scan or a
killed one never leaves a half-written entry under a final name; an entry that does not read back whole is
rebuilt, and a cache that cannot be written only costs a rescan.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from streamcli_sources._scan import cache_dir

VERSION = 2  # bump when a decoded column or an index entry changes meaning
_log = logging.getLogger("streamcli")
_swept: set[str] = set()  # folders whose dead temporaries this process has removed


def folder(option: str = "") -> Path:
    """The events cache folder for the ``cache_dir`` option (empty: the shared default)."""
    return cache_dir(option) / "events"


def key(path: str, **extra: Any) -> str:
    """A name for ``path`` as it is now (path, inode, size, mtime, ctime) plus ``extra`` options."""
    st = os.stat(path)
    ident = {
        "path": os.path.abspath(path),
        "ino": st.st_ino,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "v": VERSION,
        **extra,
    }
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def temp_prefix() -> str:
    """The prefix of this process's temporary entries: ``sweep`` tells a dead writer's leftovers by it."""
    return f".tmp-{socket.gethostname()}-{os.getpid()}-"


def sweep(where: Path) -> None:
    """Remove the temporary entries that a killed process of this host left in ``where`` (once per process)."""
    if str(where) in _swept:
        return
    _swept.add(str(where))
    mine = f".tmp-{socket.gethostname()}-"
    try:
        names = [n for n in os.listdir(where) if n.startswith(mine)]
    except OSError:
        return
    for name in names:
        pid = name[len(mine) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            target = where / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def load_arrays(where: Path, name: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``name``, or ``None`` when absent or not readable whole (then the caller rebuilds)."""
    path = where / f"{name}.npz"
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        return None
    except Exception as exc:  # truncated, bit-flipped, not a zip: whatever it is, rebuild it
        _log.warning("streamcli: the events cache entry %s does not read back whole (%s); rebuilding it", path, exc)
        return None


def store_arrays(where: Path, name: str, arrays: dict[str, np.ndarray]) -> None:
    """Store ``arrays`` under ``name`` atomically; a failure is logged, not raised."""
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=temp_prefix(), suffix=".npz")
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


def discard_dir(final: Path) -> None:
    """Take a damaged entry out of the way (renamed first, so no reader maps it meanwhile), then delete it."""
    trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=temp_prefix()))
    try:
        os.rename(final, trash / final.name)
    except FileNotFoundError:  # another process took it already
        pass
    finally:
        shutil.rmtree(trash, ignore_errors=True)
