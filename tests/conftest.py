"""Shared fixtures and the test data's whereabouts.

Real files: ``tests/data`` (small, permissive, travels with the repository) and the larger shared set
(``$STREAMCLI_DATA``, else ``../shared/data`` beside the checkout), whose tests are skipped where it is
absent; ``STREAMCLI_DATA=/nonexistent`` runs the suite as a clone without it would.

The inner loop: ``.venv/bin/pytest -q -m "not slow"`` (no worker processes, no long decodes; under a minute).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from _groups import name_xdist_groups
from _guard import fast_tests_start_no_process, pytest_runtest_makereport  # noqa: F401  (the slow marker, enforced)
from _moto import bucket, moto_s3  # noqa: F401  (fixtures: a moto S3 server for the object-storage tests)
from _ray_session import processes as ray_session_processes
from _ray_session import pytest_runtest_teardown, ray_session  # noqa: F401  (one Ray for the ray group's tests)
from _scans import video_scans  # noqa: F401  (one scan cache for the tests that scan the real clips)

pytest_plugins = ["pytester"]  # test_markers.py runs the guard on tests of its own


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own, which name_xdist_groups completes
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On pytest-xdist workers, the slow tests first (each file's in its order): the long ones are handed out
    while the quick ones can still fill in around them, so no worker is left alone with one at the end."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
        name_xdist_groups(config, items)


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own cache (video lengths, converted recordings, fetched objects), inherited by the processes
    it starts: tests running in parallel (pytest-xdist) never share one, nor touch the user's."""
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path_factory.mktemp("cache", numbered=True)))


def _segments() -> set[str]:
    """This process's segments (other processes on the machine may be running loaders too)."""
    mine = f"streamcli_{os.getpid()}_"
    return {n for n in os.listdir("/dev/shm") if n.startswith(mine)} if os.path.isdir("/dev/shm") else set()


def _children() -> list[psutil.Process]:
    """This process's live descendants but multiprocessing's own helpers, which live as long as this process: the
    resource tracker and the fork server (the workers it forks are its children and carry its command line), and
    the processes of the ray group's shared Ray instance."""
    me, ray = os.getpid(), ray_session_processes()
    return [
        c
        for c in psutil.Process().children(recursive=True)
        if c.is_running() and c.status() != "zombie" and not _mp_helper(c, me) and c.pid not in ray
    ]


def _mp_helper(p: psutil.Process, parent: int) -> bool:
    try:
        line = " ".join(p.cmdline())
        return "resource_tracker" in line or ("forkserver" in line and p.ppid() == parent)
    except psutil.Error:  # gone meanwhile
        return True


def assert_no_leaks(before: set[str], timeout: float = 5.0) -> None:
    """No shared-memory segment of ours and no child process may outlive a loader."""
    deadline = time.monotonic() + timeout
    while True:
        leaked, kids = _segments() - before, _children()
        if not leaked and not kids:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"leaked segments {sorted(leaked)}, live children {[k.pid for k in kids]}")
        time.sleep(0.05)


@pytest.fixture
def no_leaks() -> Iterator[None]:
    import gc

    before = _segments()
    yield
    gc.collect()
    assert_no_leaks(before)


DATA = Path(__file__).resolve().parent / "data"
"""Small real files made by others that travel with the repository (tests/data/README.md: sources, licences)."""


def data_root(sub: str) -> Path:
    """A folder of ``tests/data``: always present, so a test that uses it is never skipped."""
    return DATA / sub


def shared_root() -> Path:
    """Where the larger shared set lives: ``$STREAMCLI_DATA`` if set, else ``../shared/data`` beside the checkout.

    Setting ``STREAMCLI_DATA`` to a missing folder hides the shared set, which is how to check that the suite
    passes in a clone that has none.
    """
    env = os.environ.get("STREAMCLI_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(sub: str) -> Path | None:
    """A folder of the larger shared set, or ``None`` where this checkout has none."""
    root = shared_root() / sub
    return root if root.is_dir() else None


def _absent(sub: str) -> str:
    where = shared_root() / sub
    return f"needs the larger shared test data at {where} (set STREAMCLI_DATA or put shared/ beside the repo)"


def needs_shared(sub: str) -> pytest.MarkDecorator:
    """Mark a test that reads the shared set: skipped, with the reason, where that set is absent."""
    return pytest.mark.skipif(shared_data(sub) is None, reason=_absent(sub))


def require_shared(sub: str) -> Path:
    """The shared folder ``sub``, or skip the calling test (or fixture) with the reason."""
    root = shared_data(sub)
    if root is None:
        pytest.skip(_absent(sub))
    return root


@pytest.fixture
def books(tmp_path: Path) -> Path:
    """Three tiny text files: a folder for the text source."""
    d = tmp_path / "books"
    d.mkdir()
    for i in range(3):
        (d / f"b{i}.txt").write_text(f"book {i} " * (5 + 3 * i))
    return d
