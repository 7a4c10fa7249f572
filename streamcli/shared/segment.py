"""The shared-memory segment under the ring, and its lifetime across processes.

Its creator (the loader) is its one owner, which alone unlinks it while it lives. Every process that has it open
holds a shared ``flock`` on it (``hold_alive``): that, not the pid in its name, tells another loader's sweep
(``sweep_stale``) that it is in use. If the loader dies without closing, its workers' watchdog unlinks it; failing
that, Python's resource tracker, or the next loader's sweep."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import Any

PREFIX = "streamcli_"  # segment names: streamcli_<creator pid>_<random>
STALE_AFTER_S = 5.0  # a segment younger than this may still be on its way to being locked by its creator
CHUNK = 64 * 2**20  # bytes backed or mapped per system call: a signal waits for one chunk at most
_MADV_POPULATE_WRITE = 23  # Linux 5.14+


class Segment(shared_memory.SharedMemory):
    def close(self) -> None:
        with contextlib.suppress(BufferError):  # the consumer still holds views: freed with the last of them
            super().close()


class SegmentLock:
    """The producers' lock: an exclusive POSIX record lock (``lockf``) on the segment's file, which the kernel drops
    when a holder dies and which leaves nothing behind (a named semaphore would). Picklable; each process opens its
    own descriptor. On Linux it never interacts with the ``flock`` of ``hold_alive``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_fd": None}

    def __enter__(self) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        fcntl.lockf(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        assert self._fd is not None
        fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def hold_alive(shm: shared_memory.SharedMemory) -> None:
    """Hold a shared ``flock`` on the segment's file while this process has it open (dropped however it dies)."""
    fd = getattr(shm, "_fd", -1)
    if fd >= 0:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


def sweep_stale(root: str = "/dev/shm") -> list[str]:
    """Unlink the segments no live process holds (a loader whose whole process group was killed at once could not);
    returns their names. A segment is stale only if this sweep can take its liveness lock exclusively; those whose
    creator's pid is alive here, and young ones (their creator may be about to lock them), are left alone too."""
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return []
    swept = []
    for name in names:
        path = os.path.join(root, name)
        try:
            os.kill(int(name[len(PREFIX) :].split("_")[0]), 0)
            continue  # its creator's pid is alive (or reused) here
        except ValueError:
            continue
        except ProcessLookupError:
            pass
        except OSError:  # PermissionError: alive, someone else's
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if time.time() - os.fstat(fd).st_mtime < STALE_AFTER_S:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held shared by a live user: BlockingIOError
            os.unlink(path)
            swept.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return swept


def back(shm: shared_memory.SharedMemory, offset: int, length: int) -> bool:
    """Back ``length`` bytes from ``offset`` with memory now; False if there is no room (a full ``/dev/shm`` would
    otherwise be a SIGBUS in whichever process first writes there). Chunk by chunk: a signal is handled between."""
    fd = getattr(shm, "_fd", -1)
    if fd < 0 or not hasattr(os, "posix_fallocate") or length <= 0:
        return True  # not a POSIX file (or no fallocate): nothing to reserve
    for start in range(offset, offset + length, CHUNK):
        try:
            os.posix_fallocate(fd, start, min(CHUNK, offset + length - start))
        except OSError as exc:  # ENOSPC, ENOMEM: no room; anything else: unsupported here, the segment stays sparse
            return exc.errno not in (errno.ENOSPC, errno.ENOMEM)
    return True


def populate(
    shm: shared_memory.SharedMemory, length: int | None = None, stop: Callable[[], bool] | None = None
) -> bool:
    """Map the segment's first ``length`` bytes (all by default) into this process at once, rather than a fault per
    page on the ring's first lap. Chunk by chunk: signals are handled, and ``stop()`` may give up (False), between."""
    mm = getattr(shm, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not sys.platform.startswith("linux"):  # the value is Linux's
        return True
    end = len(mm) if length is None else min(length, len(mm))
    for start in range(0, end, CHUNK):
        if stop is not None and stop():
            return False
        try:
            mm.madvise(_MADV_POPULATE_WRITE, start, min(CHUNK, end - start))
        except OSError:  # an older kernel, or pages not backed yet (``Ring.reserve``)
            return True
    return True
