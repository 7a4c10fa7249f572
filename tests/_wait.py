"""Waiting for something to happen in a test: poll a positive signal until a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(pred: Callable[[], T], timeout: float, what: str, every: float = 0.02) -> T:
    """Poll ``pred`` until it returns something true, and return that; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout} s for {what}")
        time.sleep(every)
