"""A worker notices its loader's death within a second, even while a source blocks it.

Two ways, since either alone has a gap:

- On Linux the kernel sends the worker ``SIGKILL`` when the thread that started it dies
  (``prctl(PR_SET_PDEATHSIG)``); only set when that thread is the main thread, which lives as long as the
  process. It works even while a source holds the GIL in C code.
- Everywhere, a daemon thread watches a pipe whose only writer is the loader's process: end of file means that
  process is gone (the kernel closes its descriptors however it dies, ``SIGKILL`` included). It also watches the
  parent pid, for start methods (fork) whose workers inherit the writing end.

What happens to the shared-memory segment then: the watchdog unlinks it before the worker exits (the loader is
gone, nobody will attach again, and the other workers keep their mappings). Were every process killed at once,
Python's resource tracker unlinks it once the last of them is gone, and if the tracker died too, the next loader's
sweep does (``segment.sweep_stale``: no process holds the segment's liveness lock any more).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

CHECK_S = 0.5  # how often the watchdog also checks the parent pid
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Linux: ask the kernel for ``SIGKILL`` when the parent thread dies. Elsewhere, or if refused: nothing."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def watch_parent(alive: Connection, parent_pid: int, on_death: Callable[[], None]) -> threading.Thread:
    """Start a daemon thread that calls ``on_death()`` and then ``os._exit(1)`` once the parent is gone: ``alive``
    reads end of file, or the parent pid changes (re-parented)."""

    def watch() -> None:
        while True:
            try:
                if alive.poll(CHECK_S):
                    alive.recv_bytes()  # nothing is ever sent: this raises EOFError once the writer is gone
            except (EOFError, OSError):
                break
            if os.getppid() != parent_pid:
                break
        with contextlib.suppress(BaseException):
            on_death()
        os._exit(1)

    thread = threading.Thread(target=watch, name="streamcli-watchdog", daemon=True)
    thread.start()
    return thread
