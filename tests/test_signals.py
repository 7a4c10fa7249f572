"""SIGTERM and SIGHUP (a closed terminal) reach the CLI mid-run: it exits 130 and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref

import psutil
import pytest
from _wait import wait_until

from streamcli import cli


def _helper(p: psutil.Process, cli: int) -> bool:
    """Whether ``p`` is one of multiprocessing's helpers: the resource tracker, or the fork server (the CLI's
    child; the workers it forks are its children, and carry its command line)."""
    line = " ".join(p.cmdline())
    return "resource_tracker" in line or ("forkserver" in line and p.ppid() == cli)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_cli_cleans_up_on_termination_signals(sig: signal.Signals) -> None:
    env = {**os.environ, "STREAMCLI_LOAD_PLUGINS": "camera"}
    cmd = [sys.executable, "-m", "streamcli", "preview", "camera", "64", "-w", "2", "-b", "2", "-t", "2"]
    cmd += ["--epochs", "0", "-s", "size=32x32"]  # keeps going: a fast machine must not finish before the signal
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        workers: list[psutil.Process] = []
        kids: list[psutil.Process] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            kids = psutil.Process(proc.pid).children(recursive=True)  # the workers, the tracker, a fork server
            workers = [k for k in kids if not _helper(k, proc.pid)]
            time.sleep(0.1)
        assert len(workers) == 2, "the workers never started"
        segments = [n for n in os.listdir("/dev/shm") if n.startswith(f"streamcli_{proc.pid}_")]
        assert segments

        def mapped() -> bool:  # a worker maps the ring once its start-up is done: batches flow from then on
            try:
                return all(any(s in m.path for m in w.memory_maps() for s in segments) for w in workers)
            except psutil.Error:
                return False

        wait_until(mapped, 30, "both workers to map the ring")
        proc.send_signal(sig)
        rc = proc.wait(timeout=10)
        assert rc == 130, proc.stderr.read() if proc.stderr else rc
        _gone, alive = psutil.wait_procs(kids, timeout=5)
        assert not alive, f"processes left running: {[(p.pid, p.cmdline()) for p in alive]}"
        assert not any(os.path.exists(f"/dev/shm/{n}") for n in segments)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_signal_inside_a_finalizer_is_delivered_after_it() -> None:
    """Python drops an exception raised in a finalizer; the CLI's handler must not lose the signal there."""

    class Holder:
        pass

    def release() -> None:  # a slot's finalizer: the signal lands while it runs
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):
            pass

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGTERM, cli._interrupt)
    signal.signal(signal.SIGHUP, cli._interrupt)
    try:
        holder = Holder()
        weakref.finalize(holder, release)
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            del holder  # runs the finalizer
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
