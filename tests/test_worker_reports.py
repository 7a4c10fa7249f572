"""What the loader says about its workers: which stream a dead one was reading, and when ``timeout=`` fires."""

from __future__ import annotations

import os
import signal
import tempfile
import time

import pytest
from _sources import AbortingSource, CountingSource, HangingSource, SlowSource, mark_started, wait_started

from streamcli import StreamLoader, WorkerError
from streamcli.workers import pool


@pytest.mark.slow
def test_a_dead_worker_is_reported_with_the_stream_and_step_it_was_reading(no_leaks: None) -> None:
    with StreamLoader(AbortingSource([40] * 4, bad=3, at=10), 4, 4, num_workers=2, shuffle=False) as loader:
        with pytest.raises(WorkerError, match=r"died with signal SIGABRT while reading stream 3 \('3'\) near step 10$"):
            for _ in loader:
                pass


@pytest.mark.slow
def test_timeout_counts_seconds_without_a_step_not_without_a_batch(no_leaks: None) -> None:
    # A batch takes 120 steps of at least 10 ms: at least 1.2 s, more than the timeout whatever the load, yet a
    # step comes every 10 ms: 100 times within the timeout, so a loaded machine does not make a false stall.
    with (
        tempfile.TemporaryDirectory() as up,
        StreamLoader(SlowSource([240], delay=0.01, started=up), 1, 120, num_workers=1, timeout=1.0) as loader,
    ):
        wait_started(up, 1)  # a worker's start-up (spawn, imports) reads no step either: keep it out of the test
        assert len([b for b in loader]) == 2


@pytest.mark.slow
def test_timeout_fires_on_a_source_that_hangs_naming_where(no_leaks: None) -> None:
    with (
        tempfile.TemporaryDirectory() as marks,
        StreamLoader(HangingSource([5], marks, started=marks), 1, 2, num_workers=1, timeout=1.0) as loader,
        pytest.raises(WorkerError, match=r"read no step for 1 s \(timeout=1.0\): worker 0 near step 0 of stream 0"),
    ):
        wait_started(marks, 1)
        next(iter(loader))


@pytest.mark.slow
def test_timeout_lets_a_new_epoch_wait_for_a_worker_that_reads_on(no_leaks: None) -> None:
    """A worker acknowledges a new epoch once its piece of work is done, here a batch of 1.2 s: not a stall."""
    with (
        tempfile.TemporaryDirectory() as up,
        StreamLoader(
            SlowSource([480], delay=0.01, started=up), 1, 120, num_workers=1, timeout=1.0, shuffle=False
        ) as loader,
    ):
        wait_started(up, 1)
        it = iter(loader)
        next(it)  # the worker goes on with the next batch: 120 steps of at least 10 ms
        assert next(iter(loader)).epoch == 1
        del it


@pytest.mark.slow
def test_a_worker_that_dies_idle_is_not_said_to_be_reading(no_leaks: None) -> None:
    with StreamLoader(CountingSource([3]), 1, 2, num_workers=1) as loader:
        assert len(list(loader)) == 2
        deadline = time.monotonic() + 10
        while loader.ring.control.reading(0)[0] != -1:  # the worker has nothing more to do: it idles
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert loader._pool is not None
        os.kill(loader._pool.procs[0].pid, signal.SIGKILL)
        with pytest.raises(WorkerError, match=r"died with signal SIGKILL") as ei:
            list(loader)
    assert "while reading" not in str(ei.value)


class _SlowSetup(CountingSource):
    """``setup_worker`` takes ``delay`` seconds (a model to load, say), then reads like ``CountingSource``."""

    def __init__(self, lengths: list[int], delay: float) -> None:
        super().__init__(lengths)
        self.delay = delay

    def setup_worker(self) -> None:
        time.sleep(self.delay)


class _HangingSetup(CountingSource):
    """``setup_worker`` marks itself started (``mark_started``), then never returns."""

    def __init__(self, lengths: list[int], started: str) -> None:
        super().__init__(lengths)
        self.started = started

    def setup_worker(self) -> None:
        mark_started(self.started)
        while True:
            time.sleep(1.0)


class _ExitingSetup(CountingSource):
    """``setup_worker`` ends its process at once, as a crashing native library does."""

    def setup_worker(self) -> None:
        os._exit(1)


@pytest.mark.slow
def test_timeout_does_not_count_a_slow_worker_start_up(no_leaks: None) -> None:
    # The start-up (spawn, imports, a setup_worker of 2 s) is far longer than the timeout, and reads no step.
    with StreamLoader(_SlowSetup([4, 4], delay=2.0), 2, 2, num_workers=1, timeout=1.0, shuffle=False) as loader:
        assert len(list(loader)) == 2


@pytest.mark.slow
def test_a_setup_worker_that_hangs_is_named_once_start_up_takes_too_long(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    monkeypatch.setattr(pool, "STARTUP_S", 0.0)  # the start-up limit is then timeout= itself
    with (
        tempfile.TemporaryDirectory() as up,
        StreamLoader(_HangingSetup([4], up), 1, 2, num_workers=1, timeout=0.5) as loader,
        pytest.raises(WorkerError, match=r"^worker 0 \(pid \d+\) is still in the source's setup_worker\(\) after"),
    ):
        wait_started(up, 1)  # in setup_worker for good, and its message saying so is in the pipe
        next(iter(loader))


@pytest.mark.slow
def test_a_worker_that_dies_in_setup_worker_is_reported_naming_it(no_leaks: None) -> None:
    with StreamLoader(_ExitingSetup([3, 3]), 2, 2, num_workers=1) as loader:
        with pytest.raises(WorkerError, match=r"died with exit code 1 in the source's setup_worker\(\)$") as ei:
            list(loader)
    assert "main module" not in str(ei.value)  # the imports went fine: not the missing-main-guard hint
