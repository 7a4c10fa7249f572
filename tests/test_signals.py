"""SIGTERM and SIGHUP (a closed terminal) reach the CLI mid-run: it exits 130 and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_cli_cleans_up_on_termination_signals(sig: signal.Signals) -> None:
    env = {**os.environ, "STREAMCLI_LOAD_PLUGINS": "camera"}
    cmd = [sys.executable, "-m", "streamcli", "preview", "camera", "64", "-w", "2", "-b", "2", "-t", "2"]
    cmd += ["--batches", "1000000", "-o", "size=32x32"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        workers: list[psutil.Process] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            kids = psutil.Process(proc.pid).children(recursive=True)
            workers = [k for k in kids if "resource_tracker" not in " ".join(k.cmdline())]
            time.sleep(0.1)
        assert len(workers) == 2, "the workers never started"
        time.sleep(1.0)  # let batches flow
        segments = [n for n in os.listdir("/dev/shm") if n.startswith(f"streamcli_{proc.pid}_")]
        assert segments
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 130
        _gone, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive, f"workers left running: {[p.pid for p in alive]}"
        assert not any(os.path.exists(f"/dev/shm/{n}") for n in segments)
    finally:
        if proc.poll() is None:
            proc.kill()
