"""``Ahead``: the thread that prepares batches, and the consumer that makes them itself while it waits anyway."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from streamcli.lives.ahead import _SWITCH, Ahead


class Items:
    """0, 1, 2, ...: slow (and "waited for") while ``slow`` is set; records which thread made each item."""

    def __init__(self, n: int, fail_at: int = -1, fail: BaseException | None = None) -> None:
        self.n, self.fail_at, self.fail = n, fail_at, fail
        self.slow = True
        self.made_by: list[str] = []

    def __iter__(self) -> Iterator[int]:
        for i in range(self.n):
            if i == self.fail_at:
                assert self.fail is not None
                raise self.fail
            if self.slow:
                time.sleep(0.003)
            self.made_by.append(threading.current_thread().name)
            yield i

    def waited(self) -> bool:
        return self.slow


def _consume(ahead: Ahead[int], items: Items, n: int, fast_from: int, slow_from: int) -> list[int]:
    got = []
    for i in range(n):
        items.slow = not (fast_from <= i < slow_from)
        got.append(next(ahead))
        if fast_from <= i < slow_from:
            time.sleep(0.004)  # a busy consumer: the items are ready before it asks
    return got


def test_items_keep_their_order_as_the_thread_parks_and_takes_over_again() -> None:
    items = Items(60)
    ahead = Ahead(iter(items), depth=2, waited=items.waited)
    try:
        got = _consume(ahead, items, 60, fast_from=20, slow_from=40)
    finally:
        ahead.stop()
    assert got == list(range(60))
    main = threading.current_thread().name
    # Waited for: the consumer makes them; whole before it asks: the thread does; waited for again: the consumer.
    assert main in items.made_by[:20] and main in items.made_by[40:]
    assert "streamcli-ahead" in items.made_by[20:40]
    with pytest.raises(StopIteration):
        next(ahead)


@pytest.mark.parametrize("parked", [False, True])
def test_a_failure_reaches_the_consumer_in_either_mode(parked: bool) -> None:
    items = Items(40, fail_at=2 * _SWITCH + 2, fail=ValueError("bad item"))
    items.slow = parked
    ahead = Ahead(iter(items), depth=2, waited=items.waited)
    try:
        with pytest.raises(ValueError, match="bad item"):
            for _ in range(40):
                next(ahead)
                if not parked:
                    time.sleep(0.004)
        assert ahead.failed
    finally:
        ahead.stop()


def test_a_keyboard_interrupt_while_parked_is_the_consumers_own() -> None:
    """Raised as it is, not as the loader's failure (the loader then stays usable for a new iter())."""
    items = Items(40, fail_at=2 * _SWITCH + 2, fail=KeyboardInterrupt())
    ahead = Ahead(iter(items), depth=2, waited=items.waited)
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in range(40):
                next(ahead)
        assert not ahead.failed
        assert threading.current_thread().name in items.made_by  # it was parked
        with pytest.raises(RuntimeError, match="stopped"):
            next(ahead)
    finally:
        ahead.stop()


def test_stop_while_parked_ends_the_thread() -> None:
    items = Items(100)
    ahead = Ahead(iter(items), depth=2, waited=items.waited)
    for _ in range(2 * _SWITCH + 2):
        next(ahead)
    t0 = time.perf_counter()
    ahead.stop()
    assert time.perf_counter() - t0 < 1.0
    assert not ahead._thread.is_alive()
