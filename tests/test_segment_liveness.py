"""Shared-memory segments: the sweep judges them by a lock their users hold, and orphaned workers exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from streamcli.shared.segment import sweep_stale

HERE = Path(__file__).resolve().parent

_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    print("locked", flush=True)
    sys.stdin.read()  # hold the lock until the test closes our stdin
    """
)


def _dead_pid() -> int:
    """A pid no process has: the kernel hands out pids below ``pid_max`` only (no process started to find one)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _old_file(path: Path) -> Path:
    path.write_bytes(b"x")
    os.utime(path, (time.time() - 60, time.time() - 60))
    return path


@pytest.mark.slow  # the holder is another process
def test_a_segment_whose_pid_looks_dead_but_whose_lock_is_held_survives_the_sweep(tmp_path: Path) -> None:
    """As a live loader in another PID namespace looks: its pid is not visible here, but it holds the lock."""
    pid = _dead_pid()
    held = _old_file(tmp_path / f"streamcli_{pid}_held")
    abandoned = _old_file(tmp_path / f"streamcli_{pid}_gone")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(held)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert sweep_stale(str(tmp_path)) == [abandoned.name]
        assert held.exists() and not abandoned.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    assert sweep_stale(str(tmp_path)) == [held.name]  # its holder is gone: now it is abandoned


def test_a_young_unlocked_segment_is_left_to_its_creator(tmp_path: Path) -> None:
    young = tmp_path / f"streamcli_{_dead_pid()}_young"
    young.write_bytes(b"x")
    assert sweep_stale(str(tmp_path)) == [] and young.exists()


@pytest.mark.slow
def test_a_live_loaders_segment_survives_a_sweep_that_cannot_see_its_pid(tmp_path: Path) -> None:
    from _sources import CountingSource

    from streamcli import StreamLoader

    with StreamLoader(CountingSource([50] * 4), 2, 3, num_workers=1) as loader:
        name = loader.ring.spec.name
        # The same file under a name whose pid is dead: how the segment looks from another PID namespace.
        alias = f"streamcli_{_dead_pid()}_alias"
        os.link(f"/dev/shm/{name}", f"/dev/shm/{alias}")
        try:
            os.utime(f"/dev/shm/{alias}", (time.time() - 60, time.time() - 60))
            assert alias not in sweep_stale()
            assert len([b for b in loader]) > 0
        finally:
            Path(f"/dev/shm/{alias}").unlink(missing_ok=True)


_HANG = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, {here!r})
    from _sources import HangingSource
    from streamcli import StreamLoader

    def run():
        loader = StreamLoader(HangingSource([100, 100], {marks!r}), 2, 2, num_workers=2)
        print(*[p.pid for p in loader._pool.procs], loader.ring.spec.name, flush=True)
        next(iter(loader))  # blocks: both workers hang in the source

    if __name__ == "__main__":
        if {thread}:  # the kernel's parent-death signal follows threads: only the watchdog can help
            t = threading.Thread(target=run)
            t.start()
            t.join()  # a main thread that returned would start the interpreter's shutdown: no import works then
        else:
            run()
    """
)


def _wait(what: str, done: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout} s for {what}")
        time.sleep(0.05)


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "thread"), [(signal.SIGKILL, False), (signal.SIGTERM, False), (signal.SIGKILL, True)])
def test_workers_blocked_in_a_source_exit_soon_after_their_loader_is_killed(
    tmp_path: Path, sig: int, thread: bool
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "main.py"
    script.write_text(_HANG.format(here=str(HERE), marks=str(marks), thread=thread))
    main = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert main.stdout is not None
    *pids, segment = main.stdout.readline().split()
    workers = [int(p) for p in pids]
    try:
        _wait("both workers to block in the source", lambda: len(list(marks.iterdir())) == 2, 60)
        assert {p.name for p in marks.iterdir()} == {f"hang_{p}" for p in workers}
        main.send_signal(sig)
        main.wait(timeout=10)
        _wait("the workers to exit", lambda: not _alive(workers), 5)
        _wait("the segment to go", lambda: not os.path.exists(f"/dev/shm/{segment}"), 5)
    finally:
        for p in _alive(workers):
            os.kill(p, signal.SIGKILL)
        if main.poll() is None:
            main.kill()
