"""Test sources. They live in an importable module so spawned workers can unpickle them."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence

import numpy as np

from streamcli import BaseSource, Field


class CountingSource(BaseSource):
    """Stream i has lengths[i] steps; step p of stream i is ``x = [i, p]`` so every value names its origin."""

    def __init__(self, lengths: Sequence[int], *, report_length: bool = True, pad: int = 0) -> None:
        self.lengths = [int(n) for n in lengths]
        self.report_length = report_length
        self.pad = pad  # extra payload bytes per step, to exercise bigger slots

    def items(self) -> list[int]:
        return list(range(len(self.lengths)))

    def fields(self) -> list[Field]:
        out = [Field("x", (2,), "int64")]
        if self.pad:
            out.append(Field("blob", (self.pad,), "uint8"))
        return out

    def length(self, item: int) -> int | None:
        return self.lengths[item] if self.report_length else None

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item]):
            step = {"x": np.array([item, p], np.int64)}
            if self.pad:
                step["blob"] = np.full(self.pad, (item * 31 + p) % 251, np.uint8)
            yield step


class CountingBlocks(CountingSource):
    """``CountingSource``'s steps in blocks of 3 (a block may cross a batch's end)."""

    block_steps = True

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item], 3):
            q = np.arange(p, min(p + 3, self.lengths[item]), dtype=np.int64)
            yield {"x": np.stack([np.full_like(q, item), q], axis=1)}


class RaisingSource(CountingSource):
    """Raises while reading stream ``bad`` at step ``at`` (or while opening it if ``at`` is -1)."""

    def __init__(self, lengths: Sequence[int], bad: int, at: int) -> None:
        super().__init__(lengths)
        self.bad, self.at = bad, at

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        if item == self.bad and self.at < 0:
            raise OSError(f"cannot open stream {item}")  # eagerly, before any step
        return self._steps(item, start)

    def _steps(self, item: int, start: int) -> Iterator[dict[str, np.ndarray]]:
        for p, step in enumerate(super().open(item, start), start):  # (at position ``at``, however opened)
            if item == self.bad and p == self.at:
                raise RuntimeError(f"corrupt frame in stream {item}")
            yield step


def mark_started(started: str | None) -> None:
    """In a worker's ``setup_worker``: write ``started_<pid>`` into the folder ``started`` (if one is given), so a
    test can wait until its workers are up before anything it times (``wait_started``)."""
    if started is not None:
        with open(os.path.join(started, f"started_{os.getpid()}"), "w"):
            pass


def wait_started(started: str, workers: int, timeout: float = 60.0) -> None:
    """Wait until ``workers`` workers have marked themselves started in the folder ``started``."""
    deadline = time.monotonic() + timeout
    while len([n for n in os.listdir(started) if n.startswith("started_")]) < workers:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {workers} workers started within {timeout} s")
        time.sleep(0.01)


class SlowSource(CountingSource):
    """Sleeps per step, so tests can act while workers are busy; ``started``: see ``mark_started``."""

    def __init__(self, lengths: Sequence[int], delay: float = 0.01, started: str | None = None) -> None:
        super().__init__(lengths)
        self.delay, self.started = delay, started

    def setup_worker(self) -> None:
        mark_started(self.started)

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            time.sleep(self.delay)
            yield step


class BadShapeSource(CountingSource):
    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item]):
            yield {"x": np.array([item, p, 0], np.int32)}


class PidSource(CountingSource):
    """Writes its worker's pid into ``x`` so a test can find and kill the worker."""

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item]):
            time.sleep(0.005)
            yield {"x": np.array([os.getpid(), p], np.int64)}


class HangingSource(CountingSource):
    """Hangs for good in ``open``, after writing a file named after its process into ``marks`` (a folder), so a
    test knows which workers are blocked in it; ``started``: see ``mark_started``."""

    def __init__(self, lengths: Sequence[int], marks: str, started: str | None = None) -> None:
        super().__init__(lengths)
        self.marks, self.started = marks, started

    def setup_worker(self) -> None:
        mark_started(self.started)

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        with open(os.path.join(self.marks, f"hang_{os.getpid()}"), "w"):
            pass
        while True:
            time.sleep(1.0)


class AbortingSource(CountingSource):
    """Aborts its process (``os.abort``, no core file) when reading stream ``bad`` at step ``at``."""

    def __init__(self, lengths: Sequence[int], bad: int, at: int) -> None:
        super().__init__(lengths)
        self.bad, self.at = bad, at

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item]):
            if item == self.bad and p == self.at:
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                os.abort()
            yield {"x": np.array([item, p], np.int64)}


class EnvSource(CountingSource):
    """Every step's ``x`` is ``[int($name) or -1, p]``: what the process reading the stream sees of ``$name``."""

    def __init__(self, lengths: Sequence[int], name: str) -> None:
        super().__init__(lengths)
        self.name = name

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        seen = int(os.environ.get(self.name, "-1"))
        for p in range(start, self.lengths[item]):
            yield {"x": np.array([seen, p], np.int64)}


class SleepyOpenSource(CountingSource):
    """Blocks ``delay`` seconds in ``open`` (a network mount that stops answering for a while), then streams."""

    def __init__(self, lengths: Sequence[int], delay: float) -> None:
        super().__init__(lengths)
        self.delay = delay

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        time.sleep(self.delay)
        return super().open(item, start)


class LengthSource(CountingSource):
    """Whose ``length()`` returns ``value`` for every item, whatever it is (a plugin's bug)."""

    def __init__(self, lengths: Sequence[int], value: object) -> None:
        super().__init__(lengths)
        self.value = value

    def length(self, item: int) -> int | None:
        return self.value  # type: ignore[return-value]


class PidWindowSource(CountingSource):
    """Random access (``window``): step p of stream i is ``x = [pid, p]``, the pid of the process that sliced it."""

    def window(self, item: int) -> dict[str, _PidColumn]:
        return {"x": _PidColumn(self.lengths[item])}


class _PidColumn:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        p = np.arange(a, max(a, b), dtype=np.int64)
        return np.stack([np.full_like(p, os.getpid()), p], axis=1)
