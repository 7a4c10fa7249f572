"""``FolderLock``: one export at a time per folder, with an OS lock that dies with its process.

An export holds ``fcntl.flock`` on ``.streamcli.lock`` in its folder for its whole life. The kernel drops the
lock when the process ends, however it ends (a kill -9 too), so a lock is never stale; the file itself may be
left behind by a kill and is harmless (the next export takes it over). The file holds the holder's pid, host
and start time, so a refused export can name it. Releasing removes the file while still holding the lock;
a taker checks that the file it locked is still the one under the name, so two exports never both win.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from streamcli.errors import ExportBusyError, ShardError
from streamcli.shards.format import LOCK


class FolderLock:
    """Hold the export lock of ``out_dir`` (created if missing); raise ``ExportBusyError`` naming the holder.

    A context manager; ``release()`` is idempotent. A Ray export's driver holds it; its tasks only write shards.
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.path = Path(out_dir) / LOCK
        self._fd: int | None = None
        while True:
            try:
                Path(out_dir).mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as exc:  # e.g. a read-only folder, or a link planted as the lock file
                raise ShardError(f"cannot lock {str(self.path)!r} for the export: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ExportBusyError(
                    f"{str(out_dir)!r} is being written by another export ({holder(self.path)}); "
                    "wait for it to finish or stop it, then rerun"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:  # else the holder released (and removed) it between our open and our lock: take a new one
                break
            os.close(fd)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink(missing_ok=True)  # while still locked: a taker who opened it sees it is gone
        finally:
            os.close(fd)

    def __del__(self) -> None:  # a writer dropped without close() frees the folder, as its process's end would
        try:
            self.release()
        except Exception:
            pass

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(path: Path) -> str:
    """Who holds the lock at ``path``, as its file says: ``pid 123 on host, since <time>``."""
    try:
        info: Any = json.loads(path.read_text() or "{}")
        return f"pid {info['pid']} on {info['host']}, since {info['started']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "holder unknown"


def busy(out_dir: str | os.PathLike[str]) -> str | None:
    """Who is exporting into ``out_dir`` right now, or None; changes nothing (``verify`` asks this)."""
    path = Path(out_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder(path)
    finally:
        os.close(fd)
    return None
