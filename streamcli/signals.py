"""Holding Ctrl-C, SIGTERM and SIGHUP back across a step that must not be cut in two (a segment being made,
workers being started, torch's native start-up), and delivering them once it is whole.

Blocking a signal (``pthread_sigmask``) covers the calling thread only: the kernel gives a process-directed
signal to any thread that does not block it (a progress bar's), and Python then runs the main thread's handler
at its next bytecode, in the middle of the step. So the main thread's handlers are swapped for ones that only
note the signal, and the real ones are called when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold ``SIGNALS`` back for the block; each that came meanwhile is delivered once as it ends (raising there,
    where the caller's cleanup can see everything the block made). Outside the main thread only the mask helps."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))
    deferred = _Deferred()
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        deferred.release()


class _Deferred:
    """In the main thread, the handlers of ``SIGNALS`` note what came instead of acting; ``release`` puts them back
    and calls each one whose signal came (elsewhere no handler can be set, and this does nothing)."""

    def __init__(self) -> None:
        self.came: list[int] = []
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self.saved[sig] = signal.signal(sig, lambda signum, frame: self.came.append(signum))

    def release(self) -> None:
        saved, self.saved = self.saved, {}
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.came):  # each once, in the order they came
            handler = saved[sig]
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), sig)
