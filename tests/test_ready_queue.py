"""``ReadyQueue``: the thread that prepares batches, and the consumer that makes them itself while it waits anyway
(the thread then ends, and a new one starts once the consumer is the slower side again).

No sleeps decide who waits for whom: a "slow" item is made only once the consumer is blocked asking for it (so the
consumer always waits for it), a "fast" item is asked for only once it is queued (so the consumer never waits).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from streamcli.handout import _SWITCH, ReadyQueue

DEADLINE_S = 30.0  # a bound on each handshake, far above what it takes on a busy machine; reaching it is a failure


class Watched(threading.Condition):
    """``ReadyQueue``'s condition, counting the threads blocked in ``wait()``: while the thread makes an item, the only
    one that can be is the consumer, waiting for that item."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1  # the lock is held here and again on return
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {DEADLINE_S} s for {what}")
        time.sleep(1e-4)


class Items:
    """0, 1, 2, ...; item i is fast if ``fast_from <= i < slow_from``, else slow (and "waited for"). Records which
    thread made each item. ``take(queue)`` is the consumer's ``next()``."""

    def __init__(self, n: int, fast_from: int = 0, slow_from: int = 0, fail_at: int = -1,
                 fail: BaseException | None = None) -> None:  # fmt: skip
        self.n, self.fast_from, self.slow_from, self.fail_at, self.fail = n, fast_from, slow_from, fail_at, fail
        self.made_by: list[str] = []
        self.asked = 0  # items the consumer has asked for
        self.passed = 0  # items the consumer of this iterator took (the thread: queued) and came back for more
        self.over = False
        self.last_slow = False
        self.ready_queue: ReadyQueue[int] | None = None
        self.attached = threading.Event()
        self.consumer = threading.current_thread()

    def fast(self, i: int) -> bool:
        return self.fast_from <= i < self.slow_from

    def attach(self, depth: int = 2) -> ReadyQueue[int]:
        queue = ReadyQueue(iter(self), depth=depth, waited=self.waited)
        queue._cv = Watched()  # before any item: the thread waits on ``attached`` first
        self.ready_queue = queue
        self.attached.set()
        return queue

    def __iter__(self) -> Iterator[int]:
        _until(self.attached.is_set, "the test to attach")
        for i in range(self.n):
            self.passed = i
            if i == self.fail_at:
                assert self.fail is not None
                self.over = True
                raise self.fail
            if not self.fast(i) and threading.current_thread() is not self.consumer:
                _until(functools.partial(self._asked_and_blocked, i), f"the consumer to wait for item {i}")
            self.last_slow = not self.fast(i)
            self.made_by.append(threading.current_thread().name)
            yield i
        self.passed = self.n
        self.over = True

    def _asked_and_blocked(self, i: int) -> bool:
        """The consumer asked for item ``i`` and waits for the thread: blocked on the queue, or parked (then it
        waits for the thread to finish this item before it makes the next ones itself)."""
        queue = self.ready_queue
        assert queue is not None and isinstance(queue._cv, Watched)
        return queue.stopping() or (self.asked > i and (queue._cv.waiting > 0 or queue.parked))

    def waited(self) -> bool:
        return self.last_slow

    def take(self, queue: ReadyQueue[int]) -> int:
        i = self.asked
        if self.fast(i):  # a busy consumer: the item is queued before it asks (unless it makes items itself)
            _until(lambda: queue.parked or self.passed > i or self.over, f"item {i} to be queued")
        self.asked = i + 1
        return next(queue)


def test_items_keep_their_order_as_the_thread_parks_and_takes_over_again() -> None:
    items = Items(60, fast_from=20, slow_from=40)
    queue = items.attach()
    try:
        got = [items.take(queue) for _ in range(60)]
    finally:
        queue.stop()
    assert got == list(range(60))
    main = threading.current_thread().name
    # Waited for: the consumer makes them; whole before it asks: the thread does; waited for again: the consumer.
    assert main in items.made_by[:20] and main in items.made_by[40:]
    assert "streamcli-ready" in items.made_by[20:40]
    with pytest.raises(StopIteration):
        next(queue)


@pytest.mark.parametrize("parked", [False, True])
def test_a_failure_reaches_the_consumer_in_either_mode(parked: bool) -> None:
    fail_at = 2 * _SWITCH + 2
    items = Items(40, fail_at=fail_at, fail=ValueError("bad item"), slow_from=0 if parked else 40)
    queue = items.attach()
    try:
        with pytest.raises(ValueError, match="bad item"):
            for _ in range(40):
                items.take(queue)
        assert queue.failed
        assert items.asked == fail_at + 1  # every item before the failure arrived
        assert (threading.current_thread().name in items.made_by) == parked  # the mode under test
    finally:
        queue.stop()


def test_a_keyboard_interrupt_while_parked_is_the_consumers_own() -> None:
    """Raised as it is, not as the loader's failure (the loader then stays usable for a new iter())."""
    items = Items(40, fail_at=2 * _SWITCH + 2, fail=KeyboardInterrupt())
    queue = items.attach()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in range(40):
                items.take(queue)
        assert not queue.failed
        assert threading.current_thread().name in items.made_by  # it was parked
        with pytest.raises(RuntimeError, match="stopped"):
            next(queue)
    finally:
        queue.stop()


def test_stop_while_parked_ends_the_thread() -> None:
    items = Items(100)
    queue = items.attach()
    for _ in range(2 * _SWITCH + 2):
        items.take(queue)
    assert queue.parked and threading.current_thread().name in items.made_by  # the state under test
    assert queue._thread is None  # it ended as the consumer took over: nothing runs ahead, nothing to hand over
    made = len(items.made_by)
    queue.stop()
    assert len(items.made_by) == made
