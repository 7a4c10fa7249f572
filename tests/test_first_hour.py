"""The rough edges of a first hour: scripts without a main guard, unpicklable items, timeouts in-process."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _sources import CountingSource

from streamcli import StreamLoader

TESTS = Path(__file__).resolve().parent

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from _sources import CountingSource
from streamcli import StreamLoader
{guard}
loader = StreamLoader(CountingSource([3, 4, 5]), 2, 2, num_workers=1)
print(sum(int(b.valid.sum()) for b in loader))
loader.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_main_guard_is_told_the_fix(tmp_path: Path, guarded: bool) -> None:
    body = SCRIPT.format(tests=str(TESTS), guard="if __name__ == '__main__':" if guarded else "")
    if guarded:  # indent the three lines under the guard
        head, _, tail = body.partition("if __name__ == '__main__':\n")
        body = head + "if __name__ == '__main__':\n" + "".join("    " + line + "\n" for line in tail.splitlines())
    script = tmp_path / "train.py"
    script.write_text(body)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    if guarded:
        assert r.returncode == 0 and r.stdout.strip() == "12", r.stderr
    else:
        assert r.returncode != 0
        assert 'if __name__ == "__main__":' in r.stderr and "train.py" in r.stderr
        assert "bootstrapping" not in r.stderr


FUNCTION_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from _sources import CountingSource
from streamcli import StreamLoader


def count():
    with StreamLoader(CountingSource([3, 4, 5]), 2, 2, num_workers=1) as loader:
        return sum(int(b.valid.sum()) for b in loader)


print(count())
"""


@pytest.mark.slow
def test_an_unguarded_call_to_a_function_that_builds_the_loader_is_told_the_fix(tmp_path: Path) -> None:
    # Built inside a function, but the function is called at the top level: a worker re-running the script calls it
    # too. Unnoticed, that child dies while the parent blocks writing its start-up data (a larger source pickle
    # than fits in a pipe), a hang with no message.
    script = tmp_path / "bench.py"
    script.write_text(FUNCTION_SCRIPT.format(tests=str(TESTS)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert 'if __name__ == "__main__":' in r.stderr and "bench.py" in r.stderr
    assert "WorkerError" not in r.stderr  # refused in the parent, before any worker starts


class _Items(CountingSource):
    def items(self) -> list:  # type: ignore[type-arg]
        return [0, threading.Lock(), 2]


def test_an_unpicklable_item_is_named() -> None:
    with pytest.raises(TypeError, match=r"item 1 of source .*cannot be pickled.*_thread.lock.*plain data"):
        StreamLoader(_Items([3, 3, 3]), 2, 2, num_workers=1)


def test_timeout_in_process_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"timeout=5 needs num_workers >= 1"):
        StreamLoader(CountingSource([3]), 1, 2, timeout=5)
