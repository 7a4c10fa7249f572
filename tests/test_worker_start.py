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


_IMPORTS_ONCE = """
import os, sys
from pathlib import Path
import numpy as np
from streamcli import BaseSource, Field, StreamLoader

with open(sys.argv[1], "a") as log:  # one line each time this module is imported, in any process
    log.write(f"{os.getpid()} {__name__}\\n")
VALUE = 1  # the test rewrites this line between the loaders


class Constant(BaseSource):
    def items(self): return [0, 1]
    def fields(self): return [Field("x", (), "int64")]
    def length(self, item): return 4
    def open(self, item, start=0):
        for _ in range(start, 4):
            yield {"x": np.int64(VALUE)}


if __name__ == "__main__":
    script = Path(__file__)
    for n in range(3):
        with StreamLoader(Constant(), 2, 2, num_workers=2) as loader:
            values = {int(v) for b in loader for v in b["x"][b.valid]}
        print(sorted(values), flush=True)
        # The script is edited while it runs: workers started later must not run code the main process never ran.
        script.write_text(script.read_text().replace("VALUE = 1  #", "VALUE = 2  #"))
"""


@pytest.mark.slow
def test_the_fork_server_imports_the_main_module_once_for_every_loader_and_worker(tmp_path: Path) -> None:
    """Issue 46 (2, 13): each worker imported the main script again (a training script's torch, 2-3 s for every
    loader), and a script edited while it ran gave later workers code the main process never ran."""
    script, log = tmp_path / "train.py", tmp_path / "imports.log"
    script.write_text(_IMPORTS_ONCE)
    run = subprocess.run(
        [sys.executable, str(script), str(log)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:3] == ["[1]", "[1]", "[1]"]
    names = [line.split()[1] for line in log.read_text().splitlines()]
    assert names == ["__main__", "__mp_main__"]  # the script, then the fork server: no worker imports it again
