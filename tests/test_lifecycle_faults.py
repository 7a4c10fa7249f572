"""Lifecycle faults (issue 46 §13): a loader SIGKILLed mid-epoch leaves no folder in ``$TMPDIR`` and no process; a
source blocked with ``timeout=None`` is named in one warning; a ``length()`` that is not an int >= 0 is refused
naming the plugin and the item; a ``timeout=`` that is not a finite positive number is refused."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
import warnings
from pathlib import Path

import numpy as np
import psutil
import pytest
from _sources import CountingSource, LengthSource, SleepyOpenSource
from _wait import wait_until

from streamcli import StreamLoader
from streamcli import index as sindex
from streamcli.errors import ConfigError, SourceError
from streamcli.workers import pool

TESTS = Path(__file__).resolve().parent

_KILLED = """
import sys
sys.path.insert(0, sys.argv[1])
from _sources import SlowSource
from streamcli import StreamLoader

if __name__ == "__main__":
    with StreamLoader(SlowSource([400] * 6, delay=0.01), 2, 4, num_workers=2) as loader:
        for i, batch in enumerate(loader):
            if i == 2:
                print("mid-epoch", flush=True)
"""


def _of_run(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("STREAMCLI_TEST_RUN") == marker:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.slow  # starts a loader with workers in another process, and kills it
def test_a_loader_sigkilled_mid_epoch_leaves_no_folder_in_tmpdir_and_no_process(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A short $TMPDIR: under pytest-xdist tmp_path is long enough that the fork server's socket would not fit
    # (``workers.start`` then spawns, and no folder is made to be left behind).
    tmp = Path(tempfile.mkdtemp(prefix="sk-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    script = tmp_path / "run.py"
    script.write_text(_KILLED)
    marker = uuid.uuid4().hex
    env = {**os.environ, "TMPDIR": str(tmp), "STREAMCLI_TEST_RUN": marker}
    proc = subprocess.Popen([sys.executable, str(script), str(TESTS)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "mid-epoch"
        assert [p.name for p in tmp.iterdir() if p.name.startswith("pymp-")], "the fork server made no folder"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until(lambda: not _of_run(marker), 20, "the workers and the fork server to exit")
        wait_until(lambda: not any(tmp.iterdir()), 10, f"$TMPDIR to be empty: {sorted(os.listdir(tmp))}")
    finally:
        for p in _of_run(marker):
            p.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow  # a worker blocked in a source
def test_a_source_blocked_with_no_timeout_is_named_in_one_warning_and_the_loader_keeps_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool, "STALL_WARN_S", 0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with StreamLoader(SleepyOpenSource([3], delay=3.0), 1, 4, num_workers=1) as loader:
            got = [b["x"].numpy().copy() for b in loader]
    assert len(got) == 1 and got[0][:3, 0].tolist() == [[0, 0], [0, 1], [0, 2]]  # it waited, and delivered
    stalls = [str(w.message) for w in caught if "without progress" in str(w.message)]
    assert len(stalls) == 1, stalls
    assert "worker 0" in stalls[0] and "open()" in stalls[0] and "timeout=" in stalls[0]
    assert "stream 0 ('0')" in stalls[0]


@pytest.mark.parametrize("value", [-3, 2.5, "12", True, np.float64(4.0), np.bool_(True)], ids=repr)
def test_a_length_that_is_not_an_int_of_zero_or_more_is_refused_naming_the_plugin_and_item(value: object) -> None:
    with pytest.raises(SourceError, match=r"plugin 'LengthSource'.* item '0'.*returned .*an int >= 0"):
        with StreamLoader(LengthSource([4, 5], value), 1, 2) as loader:
            len(loader)  # (lengths are asked when an epoch is planned)
    with pytest.raises(SourceError, match=r"item '0'.*returned"):
        sindex.build(_Indexable([4, 5], value))


def test_a_numpy_integer_length_is_taken() -> None:
    with StreamLoader(LengthSource([4, 4], np.int64(4)), 1, 2) as loader:
        assert len(loader) == 4 and loader.stream_length(0) == 4


class _Indexable(LengthSource):
    def index_settings(self) -> dict[str, object]:
        return {}

    def items(self) -> list[str]:  # type: ignore[override]
        return [str(i) for i in range(len(self.lengths))]


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1.0, 0, True, "5"], ids=repr)
def test_a_timeout_that_is_not_finite_positive_seconds_is_refused(timeout: object) -> None:
    with pytest.raises(ConfigError, match=r"timeout="):
        StreamLoader(CountingSource([4]), 1, 2, num_workers=1, timeout=timeout)  # type: ignore[arg-type]
