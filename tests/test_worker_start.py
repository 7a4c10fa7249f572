"""How workers start (``streamcli.workers.start``): the fork server by default on Linux, and what a worker
forked from it must still share with its loader."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _sources import EnvSource

from streamcli import LoaderConfig, StreamLoader


def test_the_default_start_method_is_the_fork_server_on_linux_and_spawn_elsewhere() -> None:
    expected = "forkserver" if sys.platform.startswith("linux") else "spawn"
    assert inspect.signature(StreamLoader).parameters["mp_context"].default == expected
    assert LoaderConfig(batch_size=1, time_steps=1).mp_context == expected


@pytest.mark.slow
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_worker_sees_the_environment_of_its_loader_not_the_one_its_server_started_with(
    method: str, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """Credentials or an endpoint set between two loaders reach the second one's workers, though the fork
    server (started by the first) was forked before they were set."""
    name = f"STREAMCLI_TEST_ENV_{os.getpid()}"
    monkeypatch.delenv(name, raising=False)
    with StreamLoader(EnvSource([4, 4], name), 2, 2, num_workers=1, mp_context=method) as loader:
        assert {int(v) for b in loader for v in b["x"][..., 0][b.valid]} == {-1}
    monkeypatch.setenv(name, "7")
    with StreamLoader(EnvSource([4, 4], name), 2, 2, num_workers=1, mp_context=method) as loader:
        assert {int(v) for b in loader for v in b["x"][..., 0][b.valid]} == {7}


_LONG_TMPDIR = """
import sys
from _sources import CountingSource
from streamcli import StreamLoader
if __name__ == "__main__":
    with StreamLoader(CountingSource([5, 5]), 2, 2, num_workers=1) as loader:
        print(sum(int(b.valid.sum()) for b in loader))
"""


@pytest.mark.slow
def test_workers_start_where_tmpdir_is_too_long_a_path_for_the_fork_servers_socket(tmp_path: Path) -> None:
    """multiprocessing puts the fork server's socket under $TMPDIR; past 107 bytes a Unix socket cannot bind
    ("AF_UNIX path too long", found by benchmarks/fault_sweep.py, whose cases each have a TMPDIR of their own)."""
    tmpdir = tmp_path / ("t" * 100)
    tmpdir.mkdir()
    script = tmp_path / "run.py"
    script.write_text(_LONG_TMPDIR)
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(Path(__file__).parent)}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["10"]
