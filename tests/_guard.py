"""The ``slow`` marker, enforced: a test without it may start no process and decode no file of the shared set.

``fast_tests_start_no_process`` (autouse; ``conftest.py`` imports it and the hook beside it) replaces, for the
length of every test not marked ``slow``, the ways a test starts a process (``multiprocessing``, ``subprocess``,
``os.fork``, ``os.posix_spawn``, ``os.system``) and opens a shared video (``cv2.VideoCapture``, ``av.open`` on a
path under the shared set) with a refusal. A refusal raises, and fails the test at its teardown even if the code
under test caught the error. So every run of the fast selection (``make quick``) checks the marker, and
``make test`` checks it for the whole suite. ``STREAMCLI_ALLOW_PROCESSES=1`` turns the guard off (to bisect a failure).
Multiprocessing's resource tracker is not refused: Python starts it once per process (not through these calls)
the first time a segment is made, whichever test that is.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest


class ForbiddenInFastTest(RuntimeError):
    """A test not marked ``slow`` started a process or decoded a file of the shared set."""


# The standard library's own questions to the host, asked on first use by whichever test that is (platform.uname
# when h5py is imported, ctypes.util.find_library): not processes a test starts.
_HOST_QUERIES = frozenset({"uname", "ldconfig", "gcc", "cc", "ld", "objdump"})


def _shared_root() -> Path:
    """As ``conftest.shared_root`` (not imported: a pytester run has a conftest of its own)."""
    env = os.environ.get("STREAMCLI_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _shared_path(arg: object, root: Path) -> bool:
    if not isinstance(arg, (str, os.PathLike)):
        return False
    try:
        return Path(os.fspath(arg)).resolve().is_relative_to(root)
    except (OSError, ValueError, TypeError):
        return False


@pytest.fixture(autouse=True)
def fast_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("slow") is not None or os.environ.get("STREAMCLI_ALLOW_PROCESSES") == "1":
        yield
        return
    root = _shared_root().resolve()
    hits: list[str] = []

    def refuse(what: str) -> None:
        msg = f"{request.node.nodeid} {what} but is not marked slow: mark it @pytest.mark.slow"
        hits.append(msg)
        raise ForbiddenInFastTest(msg)

    def starts(what: str) -> Callable[..., Any]:
        def refused(*args: object, **kw: object) -> Any:
            refuse(f"starts a process ({what})")

        return refused

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", starts("multiprocessing"))
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def popen(self: subprocess.Popen[Any], args: Any, *rest: object, **kw: object) -> Any:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        if os.path.basename(os.fsdecode(argv[0]).split()[0]) in _HOST_QUERIES:
            return execute_child(self, args, *rest, **kw)
        refuse(f"starts a process ({os.fsdecode(argv[0])})")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", popen)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, starts(f"os.{name}"))

    def decoder(module: Any, name: str) -> None:
        real = getattr(module, name)

        def guarded(*args: object, **kw: object) -> Any:
            if args and _shared_path(args[0], root):
                refuse(f"decodes {args[0]} (the shared set)")
            return real(*args, **kw)

        monkeypatch.setattr(module, name, guarded)

    try:
        import cv2
    except ImportError:
        pass
    else:
        decoder(cv2, "VideoCapture")
    try:
        import av
    except ImportError:
        pass
    else:
        decoder(av, "open")
    yield
    if hits and not request.node.stash.get(_CALL_FAILED, False):  # else the refusal failed the test already
        pytest.fail("\n".join(hits), pytrace=False)


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when in ("setup", "call") and report.failed:
        item.stash[_CALL_FAILED] = True
    return report
