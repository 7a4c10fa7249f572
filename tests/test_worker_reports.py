"""What the loader says about its workers: which stream a dead one was reading, and when ``timeout=`` fires."""

from __future__ import annotations

import os
import signal
import tempfile
import time

import pytest
from _sources import AbortingSource, CountingSource, HangingSource, SlowSource, wait_started

from streamcli import StreamLoader, WorkerError


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
