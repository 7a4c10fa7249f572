"""The shared-memory segment under the ring (``shared.ring``), and its lifetime across processes.

Its creator (the loader) is its only owner: it alone unlinks it while it lives. Every process that has the segment
open holds a shared ``flock`` on it (``hold_alive``): that, not the pid in its name, is what tells another loader's
sweep (``sweep_stale``) that it is in use. If the loader dies without closing, its workers' watchdog unlinks the
segment (``workers.watchdog``); failing that, Python's resource tracker, or the next loader's sweep. Pages are
backed with memory before they are written (``back``), so a full ``/dev/shm`` is an error, not a SIGBUS.
``SegmentLock`` is the producers' lock on it.
"""

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


class Segment(shared_memory.SharedMemory):
    def close(self) -> None:
        try:
            super().close()
        except BufferError:
            pass  # the consumer still holds views into a slot; the mapping is freed with the last of them


class SegmentLock:
    """An exclusive lock on the segment's own file (a POSIX record lock, ``lockf``): the kernel drops it when a
    holder dies, and it leaves nothing behind, unlike a named semaphore. Picklable; each process opens its own
    descriptor. Not ``flock``: that is the liveness lock every user of the segment holds shared (``hold_alive``),
    and on Linux the two kinds of lock never interact."""

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
    """Hold a shared ``flock`` on the segment's file for as long as this process has it open: the proof, valid
    across PID namespaces (containers sharing ``/dev/shm``), that the segment is in use. The owner and every
    worker hold it; the kernel drops it when the process dies, however it dies."""
    fd = getattr(shm, "_fd", -1)
    if fd >= 0:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


STALE_AFTER_S = 5.0  # a segment younger than this may still be on its way to being locked by its creator


def sweep_stale(root: str = "/dev/shm") -> list[str]:
    """Unlink segments that no live process holds; returns their names.

    A loader whose whole process group is killed at once (a closed terminal's SIGHUP reaches Python's resource
    tracker too) cannot clean up, so the next loader does. The pid in a segment's name proves nothing across PID
    namespaces (in another container every pid looks dead), so a segment is judged by its liveness lock
    (``hold_alive``): it is stale only if this sweep can take that lock exclusively. Segments whose creator's pid
    is alive here, and young ones (their creator may be about to lock them), are left alone too.
    """
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return []
    swept = []
    for name in names:
        path = os.path.join(root, name)
        try:
            pid = int(name[len(PREFIX) :].split("_")[0])
        except ValueError:
            continue
        if _pid_alive(pid):
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


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process in this PID namespace (a reused pid counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, someone else's
        return True
    return True


CHUNK = 64 * 2**20  # bytes backed or mapped per system call: a signal waits for one chunk at most


def back(shm: shared_memory.SharedMemory, offset: int, length: int) -> bool:
    """Back ``length`` bytes of the segment from ``offset`` with memory now; False if there is no room. A
    shared-memory file is sparse: without this, a full ``/dev/shm`` (64 MiB in a default Docker container) shows
    up later as a SIGBUS in whichever process first writes a page that cannot be had, a crash with no message.
    Here it is one clear error before any worker starts (or, for ``Ring.reserve``, a window that stays shallow).
    Chunk by chunk, so that a signal (Ctrl-C, SIGTERM) is handled between two, however large the ring."""
    fd = getattr(shm, "_fd", -1)
    if fd < 0 or not hasattr(os, "posix_fallocate") or length <= 0:
        return True  # not a POSIX file (or no fallocate): nothing to reserve
    for start in range(offset, offset + length, CHUNK):
        try:
            os.posix_fallocate(fd, start, min(CHUNK, offset + length - start))
        except OSError as exc:
            # ENOSPC, ENOMEM: no room. Anything else (EOPNOTSUPP, EINVAL): fallocate is unsupported here, and the
            # segment stays sparse, as before.
            return exc.errno not in (errno.ENOSPC, errno.ENOMEM)
    return True


_MADV_POPULATE_WRITE = 23  # Linux 5.14+: map every page of the segment in this process now


def populate(
    shm: shared_memory.SharedMemory, length: int | None = None, stop: Callable[[], bool] | None = None
) -> bool:
    """Map the segment's first ``length`` bytes (all by default) into this process's page table at once: else the
    first write of each page of each slot takes a fault, in every process, all through the ring's first lap.

    Chunk by chunk, since the kernel finishes one call whatever signal comes: between two, Python runs its signal
    handlers (a Ctrl-C or SIGTERM raises there), and ``stop()`` may say to give up. Returns False if it did."""
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
