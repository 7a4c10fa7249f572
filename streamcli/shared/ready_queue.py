"""Where a batch waits for its consumer: a thread that waits for the next batches and builds their tensors while
the consumer works, so ``next()`` only takes one off a queue (failures travel through the queue too).

The thread helps only while the consumer is the slower side: while the consumer waits for every batch, each hand-over
costs a second wake-up of the main process, taken from a worker's core. So after a few batches in a row that the
consumer waited for, the thread parks and ``next()`` prepares the batch itself; after a few that were whole before
they were asked for, the thread takes over again.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from streamcli.errors import LoaderUsageError
from streamcli.shared.control import Aborted

T = TypeVar("T")
_DONE = object()
_STOPPED = (
    "the thread preparing batches has stopped, because the loader was closed or a newer iter(loader) started "
    "another epoch; iterate the newest iter(loader), or create a new StreamLoader if this one is closed"
)
_SWITCH = 3  # items in a row waited for that park the thread (the consumer makes them)
# Items in a row found whole that wake it again: more than park it, so that a few batches the workers happen to
# finish early (a faster consumer's usual jitter) do not bring back the thread's second wake-up a batch.
_RESUME = 8


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class ReadyQueue(Generic[T]):
    """Iterate ``items`` in a daemon thread, at most ``depth`` items ahead of the consumer; while the queue is
    full the thread calls ``idle()`` from time to time (the loader hands freed slots out to its workers).
    ``waited()`` says whether preparing the last item had to wait for the producers.

    The queue is a deque: when an item is ready, ``next()`` takes it without a lock (``popleft`` is atomic); the
    condition is used only to sleep when the queue is empty or full. Whoever advances ``items`` (the thread, or
    the consumer while the thread is parked) holds ``_turn`` until the item is queued, so items keep their order."""

    def __init__(
        self,
        items: Iterator[T],
        depth: int = 2,
        idle: Callable[[], None] = lambda: None,
        waited: Callable[[], bool] = lambda: False,
    ) -> None:
        self._items = items
        self._idle = idle
        self._waited = waited
        self._depth = depth
        self._queue: deque[object] = deque()
        self._cv = threading.Condition()
        self._turn = threading.Lock()
        self._stop = threading.Event()
        self._over = False  # ``items`` is exhausted, failed or aborted
        self._parked = False  # the consumer prepares its items itself
        self._streak = 0  # items in a row that argue for switching (waited for, or parked and found whole)
        self.failed = False  # preparing an item raised: the consumer got (or will get) the exception
        self._thread = threading.Thread(target=self._run, name="streamcli-ready", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while self._parked and not self._stop.is_set():
                    self._cv.wait(0.1)  # woken when the consumer hands back
            with self._turn:
                if self._over:
                    return
                if self._parked:
                    continue
                item = self._advance()
                if item is None or not self._put(item) or self._over:
                    return

    def _advance(self, catch: type[BaseException] = BaseException) -> object | None:
        """The next item, ``_DONE`` or a ``_Failure`` (of a ``catch``); None if the loader aborted. The caller
        holds ``_turn``."""
        try:
            return next(self._items)
        except StopIteration:
            self._over = True
            return _DONE
        except Aborted:  # stopped while waiting for a batch
            self._over = True
            return None
        except catch as exc:  # every failure reaches the consumer
            self._over = True
            return _Failure(exc)
        except BaseException:
            self._over = True
            raise

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
        """Whether the consumer has gone: waits for a batch check this and raise ``Aborted``."""
        return self._stop.is_set()

    def __iter__(self) -> ReadyQueue[T]:
        return self

    def __next__(self) -> T:
        item = self._take()
        if item is _DONE:
            self._queue.appendleft(_DONE)  # stay exhausted
            raise StopIteration
        if isinstance(item, _Failure):
            self.failed = True
            raise item.exc
        return item  # type: ignore[return-value]

    def _take(self) -> object:
        """The next item: off the queue, made here while the thread is parked, or waited for."""
        waited = False
        while True:
            try:
                item = self._queue.popleft()
            except IndexError:
                pass
            else:
                break
            if self._parked:
                return self._make()
            with self._cv:
                if not self._queue:
                    if self._stop.is_set() or not self._thread.is_alive():
                        raise LoaderUsageError(_STOPPED) from None
                    self._cv.wait(0.1)  # woken when the thread adds one
                    waited = True
        if len(self._queue) == self._depth - 1:  # it was full: the thread may be waiting for room
            with self._cv:
                self._cv.notify_all()
        self._streak = self._streak + 1 if waited else 0
        if self._streak >= _SWITCH and item is not _DONE:
            self._streak, self._parked = 0, True  # the thread finishes the item it is making, then parks
        return item

    def _make(self) -> object:
        """Parked: advance ``items`` in the consumer's thread. Hand back to the thread once the producers are ahead."""
        with self._turn:
            if self._queue:  # queued by the thread before it parked
                return self._queue.popleft()
            if self._over:
                raise LoaderUsageError(_STOPPED)
            item = self._advance(Exception)  # a KeyboardInterrupt is the consumer's own: raised as it is
            if item is None:
                raise LoaderUsageError(_STOPPED)
            self._streak = 0 if self._waited() else self._streak + 1
            if self._streak >= _RESUME:
                with self._cv:
                    self._streak, self._parked = 0, False
                    self._cv.notify_all()
            return item

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
