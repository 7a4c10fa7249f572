"""Faults: source errors, bad steps, skips, dead workers, signals, and nothing left behind."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from _invariants import collect
from _sources import BadShapeSource, CountingSource, PidSource, RaisingSource, SlowSource
from conftest import assert_no_leaks

from streamcli import SourceError, StepSpecError, StreamLoader, WorkerError
from streamcli.errors import RemoteTraceback

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_step_that_breaks_the_declared_spec(workers: int, no_leaks: None) -> None:
    with StreamLoader(BadShapeSource([4, 4]), 2, 2, num_workers=workers) as loader:
        with pytest.raises(StepSpecError, match=r"field 'x' is int32\[3\] but the source declared int64\[2\]"):
            list(loader)
    assert issubclass(StepSpecError, ValueError)


def test_source_error_in_process_names_plugin_item_and_step() -> None:
    with StreamLoader(RaisingSource([5, 5, 5], bad=1, at=3), 2, 2, shuffle=False) as loader:
        with pytest.raises(SourceError, match=r"'RaisingSource' failed reading item '1' \(stream 1\) at step 3") as ei:
            list(loader)
    assert isinstance(ei.value.__cause__, RuntimeError)


@pytest.mark.slow
def test_source_error_in_worker_carries_remote_traceback(no_leaks: None) -> None:
    with StreamLoader(RaisingSource([5, 5, 5], bad=2, at=-1), 2, 2, num_workers=2, shuffle=False) as loader:
        with pytest.raises(SourceError, match=r"failed opening item '2' \(stream 2\) at step 0") as ei:
            list(loader)
    cause = ei.value.__cause__
    assert isinstance(cause, RemoteTraceback) and "cannot open stream 2" in cause.tb and "Traceback" in cause.tb


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_on_error_skip_logs_counts_and_stays_deterministic(
    workers: int, caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    lengths = [6, 6, 6, 6]
    with (
        caplog.at_level(logging.WARNING, logger="streamcli"),
        StreamLoader(
            RaisingSource(lengths, bad=1, at=2), 2, 3, num_workers=workers, on_error="skip", shuffle=False
        ) as loader,
    ):
        batches = collect(loader)
        assert loader.stats.skipped == 1
    assert any("skipped item '1' (stream 1) at step 2" in r.getMessage() for r in caplog.records)
    delivered = {
        (int(s), int(p)) for bt in batches for s, p in zip(bt["stream"].ravel(), bt["position"].ravel(), strict=False)
    }
    assert {(1, 0), (1, 1)} <= delivered and (1, 2) not in delivered  # item 1 ends where it failed
    assert {(s, p) for s in (0, 2, 3) for p in range(6)} <= delivered


@pytest.mark.slow
def test_killed_worker_is_reported_within_seconds(no_leaks: None) -> None:
    with StreamLoader(PidSource([400] * 6), 4, 2, num_workers=2, shuffle=False) as loader:
        it = iter(loader)
        batch = next(it)
        victim = int(batch["x"][0, -1, 0])  # the worker reading the last row (rows go to whichever is free)
        assert victim != os.getpid() and psutil.pid_exists(victim)
        del batch
        _kill_and_expect_report(it, victim, "[01]")


@pytest.mark.slow
def test_killed_worker_is_reported_while_the_consumer_prepares_batches_itself(no_leaks: None) -> None:
    """A consumer that waits for every batch prepares them in its own thread (the ``ReadyQueue`` thread parks): a
    worker's death must reach it as fast."""
    with StreamLoader(SlowSource([10**5] * 4, delay=0.002), 4, 2, num_workers=2, epoch_end="restream") as loader:
        it = iter(loader)
        deadline = time.monotonic() + 30  # the consumer waits for nearly every batch: it parks within a few
        while not (loader._ready_queue is not None and loader._ready_queue.parked) and time.monotonic() < deadline:
            next(it)
        assert loader._ready_queue is not None and loader._ready_queue.parked  # the path under test
        victim = loader._pool.procs[1].pid if loader._pool is not None else -1
        _kill_and_expect_report(it, victim, "1")


def _kill_and_expect_report(it: Iterator[Any], victim: int, worker: str) -> None:
    """SIGKILL ``victim``; iterating on must raise a ``WorkerError`` naming it (worker index pattern ``worker``)
    within seconds."""
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=rf"worker {worker} \(pid {victim}\) died with signal SIGKILL"):
        for _ in it:
            pass
    assert time.monotonic() - start < 5.0


_SCRIPT = textwrap.dedent(
    """
    import signal, sys, time
    sys.path.insert(0, {here!r})
    from _sources import SlowSource
    from streamcli import StreamLoader
    if __name__ == "__main__":
        # Ctrl-C raises KeyboardInterrupt, as in a terminal, even where this was started with SIGINT ignored (a
        # shell's background job): Python installs its handler only where SIGINT is not ignored at start.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        loader = StreamLoader(SlowSource([10**6] * 4, delay=0.002), 4, 2, num_workers=2, epoch_end="restream",
                              mp_context={method!r})
        print("pids", *[p.pid for p in loader._pool.procs], loader.ring.spec.name, flush=True)
        for i, batch in enumerate(loader):
            if i == 3:
                print("ready", flush=True)
    """
)


def _spawn_script(tmp_path: Path, method: str) -> tuple[subprocess.Popen[str], list[int], str]:
    """The script's process, every process it started (workers, a fork server, the resource tracker), and its
    segment."""
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT.format(here=str(HERE), method=method))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    head = proc.stdout.readline().split()
    assert head[0] == "pids", head
    assert proc.stdout.readline().strip() == "ready"
    workers = [int(p) for p in head[1:3]]
    started = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert set(workers) <= set(started), (workers, started)
    return proc, started, head[3]


def _gone(pids: list[int], segment: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        if not alive and not os.path.exists(f"/dev/shm/{segment}"):
            return
        time.sleep(0.05)
    raise AssertionError(f"left behind: processes {alive}, segment exists={os.path.exists('/dev/shm/' + segment)}")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_ctrl_c_exits_promptly_and_leaves_nothing(tmp_path: Path, method: str) -> None:
    proc, started, segment = _spawn_script(tmp_path, method)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does: the whole process group
        proc.wait(timeout=10)
        assert proc.returncode != 0
        assert "KeyboardInterrupt" in (proc.stderr.read() if proc.stderr else "")
        _gone(started, segment)
    finally:
        _kill_group(proc)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_parent_killed_leaves_no_orphans_or_segments(tmp_path: Path, method: str) -> None:
    proc, started, segment = _spawn_script(tmp_path, method)
    try:
        proc.kill()  # SIGKILL: no finally blocks, no atexit
        proc.wait(timeout=5)
        _gone(started, segment, timeout=10)
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """After the checks, whatever of the script's process group is left (only if a check failed) goes, so that
    later tests do not find it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_no_leak_helper_sees_segments() -> None:
    from multiprocessing import shared_memory

    before: set[str] = set()
    name = f"streamcli_{os.getpid()}_leaktest"
    shm = shared_memory.SharedMemory(name=name, create=True, size=16)
    try:
        with pytest.raises(AssertionError, match=name):
            assert_no_leaks(before, timeout=0.2)
    finally:
        shm.close()
        shm.unlink()


class _BrokenSetup(CountingSource):
    def setup_worker(self) -> None:
        raise RuntimeError("no decoder in this worker")


WHY_NOT_STARTED = r"^worker 0 could not start: its source's setup_worker\(\) raised RuntimeError: no decoder in this"


@pytest.mark.slow
@pytest.mark.parametrize("gone_first", [False, True])
def test_worker_that_cannot_start_says_why(gone_first: bool, no_leaks: None) -> None:
    with StreamLoader(_BrokenSetup([3, 3]), 2, 2, num_workers=1) as loader:
        if gone_first:  # the worker is gone before the loader's first message to it: its pipe is closed
            assert loader._pool is not None
            loader._pool.procs[0].join(timeout=60)
        with pytest.raises(WorkerError, match=WHY_NOT_STARTED):
            list(loader)


def test_stale_segments_of_dead_processes_are_swept(tmp_path: Path) -> None:
    from streamcli.shared.segment import sweep_stale

    dead = int(Path("/proc/sys/kernel/pid_max").read_text())  # no process has it: pids stay below pid_max
    stale, live = tmp_path / f"streamcli_{dead}_abcd", tmp_path / f"streamcli_{os.getpid()}_abcd"
    for path in (stale, live, tmp_path / "streamcli_notapid_x"):
        path.write_bytes(b"x")
        os.utime(path, (time.time() - 60, time.time() - 60))  # not one a creator may be about to lock
    assert sweep_stale(str(tmp_path)) == [stale.name]
    assert not stale.exists() and live.exists()
