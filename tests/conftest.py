from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest


def _segments() -> set[str]:
    """This process's segments (other processes on the machine may be running loaders too)."""
    mine = f"streamcli_{os.getpid()}_"
    return {n for n in os.listdir("/dev/shm") if n.startswith(mine)} if os.path.isdir("/dev/shm") else set()


def _children() -> list[psutil.Process]:
    return [c for c in psutil.Process().children(recursive=True) if c.is_running() and c.status() != "zombie"]


def assert_no_leaks(before: set[str], timeout: float = 5.0) -> None:
    """No shared-memory segment of ours and no child process may outlive a loader."""
    deadline = time.monotonic() + timeout
    while True:
        leaked, kids = _segments() - before, [c for c in _children() if "resource_tracker" not in " ".join(c.cmdline())]
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


def data_root(sub: str) -> Path:
    """A folder of the real test data: ../shared/data beside the checkout, or $STREAMCLI_DATA. Never skipped."""
    root = Path(os.environ.get("STREAMCLI_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")
    if not (root / sub).is_dir():
        pytest.fail(
            f"real test data not found at {root / sub}: check out shared/ beside the repo or set STREAMCLI_DATA"
        )
    return root / sub


@pytest.fixture
def books(tmp_path: Path) -> Path:
    """Three tiny text files: a folder for the text source."""
    d = tmp_path / "books"
    d.mkdir()
    for i in range(3):
        (d / f"b{i}.txt").write_text(f"book {i} " * (5 + 3 * i))
    return d
