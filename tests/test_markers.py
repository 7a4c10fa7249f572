"""The ``slow`` marker means what it says: a test without it that starts a process or decodes a file of the shared
set fails (``_guard.py``), even where the code under test catches the refusal. So ``make quick`` (the fast
selection) and ``make test`` check every test's marker on every run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_INNER = """
import multiprocessing
import os
import subprocess
import sys

import pytest


def test_popen():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_multiprocessing():
    multiprocessing.get_context("spawn").Process(target=print).start()


def test_fork():
    if os.fork() == 0:
        os._exit(0)


def test_caught():
    try:
        subprocess.run(["true"])
    except Exception:
        pass  # the code under test swallows the refusal: the test fails all the same


def test_shared_video():
    from streamcli_sources._decode import open_capture

    open_capture(os.path.join(os.environ["STREAMCLI_DATA"], "video", "clip.mp4"), 0)


def test_a_video_of_our_own(tmp_path):
    import cv2

    cv2.VideoCapture(str(tmp_path / "clip.mp4"))  # not the shared set: allowed (and nothing to open)


@pytest.mark.slow
def test_marked_slow():
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> pytest.RunResult:
    monkeypatch.delenv("STREAMCLI_ALLOW_PROCESSES", raising=False)
    monkeypatch.setenv("STREAMCLI_DATA", str(tmp_path / "shared"))
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts processes\n")
    pytester.makeconftest("from _guard import fast_tests_start_no_process, pytest_runtest_makereport\n")
    pytester.makepyfile(test_inner=_INNER)
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist", *args)


def test_a_fast_test_that_starts_a_process_or_decodes_a_shared_file_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = _run(pytester, monkeypatch, tmp_path, "-m", "not slow")
    result.assert_outcomes(failed=4, errors=1, passed=2, deselected=1)  # test_caught: at its teardown
    out = result.stdout.str()
    for name, what in [
        ("test_popen", f"starts a process ({sys.executable})"),
        ("test_multiprocessing", "starts a process (multiprocessing)"),
        ("test_fork", "starts a process (os.fork)"),
        ("test_caught", "starts a process (true)"),
        ("test_shared_video", "decodes "),
    ]:
        assert f"test_inner.py::{name} {what}" in out, name


@pytest.mark.slow
def test_a_slow_test_may_start_processes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _run(pytester, monkeypatch, tmp_path, "-m", "slow").assert_outcomes(passed=1, deselected=6)
