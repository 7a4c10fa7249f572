"""Where a batch waits for its consumer: a thread that prepares the next batches while the consumer works.

With workers, preparing a batch in the main process means waiting for the workers to finish it, then reading its
summary and building its tensors and the weak reference that returns its slot (about 0.1-0.2 ms). ``Ahead`` runs
that in a background thread, a couple of batches ahead, so ``next()`` only takes a finished batch off a queue.
Failures travel through the queue and are raised by ``next()`` in the consumer's thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from streamcli.engine.produce import Aborted

T = TypeVar("T")
_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Ahead(Generic[T]):
    """Iterate ``items`` in a daemon thread, at most ``depth`` items ahead of the consumer; while the queue is
    full the thread calls ``idle()`` from time to time (the loader hands freed slots out to its workers).

    The queue is a deque: when an item is ready, ``next()`` takes it without a lock (``popleft`` is atomic); the
    condition is used only to sleep when the queue is empty or full."""

    def __init__(self, items: Iterator[T], depth: int = 2, idle: Callable[[], None] = lambda: None) -> None:
        self._items = items
        self._idle = idle
        self._depth = depth
        self._queue: deque[object] = deque()
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self.failed = False  # the thread raised: the consumer got (or will get) the exception
        self._thread = threading.Thread(target=self._run, name="streamcli-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
            self._put(_DONE)
        except Aborted:
            return  # stopped while waiting for a batch
        except BaseException as exc:  # every failure reaches the consumer
            self._put(_Failure(exc))

    def _put(self, item: object) -> bool:
        wait = 5e-4
        while not self._stop.is_set():
            with self._cv:
                if len(self._queue) < self._depth:
                    self._queue.append(item)
                    self._cv.notify_all()
                    return True
                self._cv.wait(wait)  # woken when the consumer takes one
            self._idle()
            wait = min(2 * wait, 0.02)  # a consumer that pauses (to evaluate, say) costs next to nothing
        return False

    def stopping(self) -> bool:
        """Whether the consumer has gone: waits in the thread check this and raise ``Aborted``."""
        return self._stop.is_set()

    def __iter__(self) -> Ahead[T]:
        return self

    def __next__(self) -> T:
        while True:
            try:
                item = self._queue.popleft()
                break
            except IndexError:
                with self._cv:
                    if not self._queue:
                        if self._stop.is_set() or not self._thread.is_alive():
                            raise RuntimeError("the thread preparing batches has stopped") from None
                        self._cv.wait(0.1)  # woken when the thread adds one
        if len(self._queue) == self._depth - 1:  # it was full: the thread may be waiting for room
            with self._cv:
                self._cv.notify_all()
        if item is _DONE:
            self._queue.appendleft(_DONE)  # stay exhausted
            raise StopIteration
        if isinstance(item, _Failure):
            self.failed = True
            raise item.exc
        return item  # type: ignore[return-value]

    def stop(self) -> None:
        """Stop the thread and close the iterator it was running; safe to call twice."""
        self._stop.set()
        with self._cv:
            self._queue.clear()
            self._cv.notify_all()  # unblock a put
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            close = getattr(self._items, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
