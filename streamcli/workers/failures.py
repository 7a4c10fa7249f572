"""How a worker's failure reads in the main process: one ``WorkerError`` line for a death, a stall or a start-up past
its limit, and a worker's own error raised again as the class it had.

Separate from ``pool`` because it is wording, not waiting: each function builds its message from what the pool
knows (the worker's exit, where it was reading, how far its start-up went).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import Any

from streamcli.errors import SourceError, StreamcliError, WorkerError
from streamcli.workers.worker import describe_exit


def remote_error(classes: list[tuple[str, str]], message: str) -> StreamcliError:
    """A worker's error as the first class it named (``worker.error_kind``: module and qualified name) that this
    process has too, so that ``except TransformError`` catches it with workers as without. Failing every one, it
    is reported as the source's failure, ``SourceError``."""
    for module, name in classes:
        found: Any = None
        with contextlib.suppress(ImportError, AttributeError):
            found = importlib.import_module(module)
            for part in name.split("."):  # a nested class: its qualified name
                found = getattr(found, part)
        if isinstance(found, type) and issubclass(found, StreamcliError):
            with contextlib.suppress(Exception):  # one that is not made from a message alone: its base
                return found(message)
    return SourceError(message)


def died(
    w: int,
    pid: int | None,
    code: int | None,
    reading: tuple[int, int],
    describe: Callable[[int], str],
    in_setup: bool,
    before_reading: bool,
) -> WorkerError:
    """Worker ``w`` has died: its exit, where it was (``reading``: stream and position, the stream -1 if none; else
    in the source's ``setup_worker``) and the likely fix. ``before_reading``: it died while spawning, having read
    no step."""
    stream, pos = reading
    where = f" while reading stream {stream} ({describe(stream)!r}) near step {pos}"
    where = where if stream >= 0 else " in the source's setup_worker()" if in_setup else ""
    hint = " (SIGKILL often means the system ran out of memory: check `dmesg`)" if code == -9 else ""
    if not where and code == 1 and before_reading:
        hint = (
            " before reading anything: a spawned worker imports your main module again, so a script must "
            'build and iterate the loader under `if __name__ == "__main__":`, and the source\'s module must '
            "import without side effects (see the worker's traceback above)"
        )
    return WorkerError(f"worker {w} (pid {pid}) died with {describe_exit(code)}{where}{hint}")


def _where(readings: list[tuple[int, int, str]], describe: Callable[[int], str]) -> str:
    return "; ".join(
        f"worker {w} near step {pos} of stream {stream} ({describe(stream)!r}), in the source's {call}"
        for w, (stream, pos, call) in enumerate(readings)
        if stream >= 0
    )


def stalling(seconds: float, readings: list[tuple[int, int, str]], describe: Callable[[int], str]) -> str:
    """The warning for a stall with ``timeout=None``: how long, where each worker is (``readings``: stream, step and
    the source's call), and that the loader keeps waiting."""
    where = _where(readings, describe) or "no worker is inside the source"
    return (
        f"the workers have read no step for {seconds:.0f} s without progress: {where}; timeout=None waits for as "
        "long as it takes (a network mount or a remote store may answer later): pass timeout=SECONDS to make a "
        "stall an error"
    )


def stalled(timeout: float, readings: list[tuple[int, int, str]], describe: Callable[[int], str]) -> WorkerError:
    """The workers read no step for ``timeout`` seconds: where each one was (``readings``, as in ``stalling``)."""
    where = _where(readings, describe)
    return WorkerError(
        f"the workers read no step for {timeout:g} s (timeout={timeout})"
        + (f": {where}" if where else "")
        + "; a source may hang there, or pass a larger timeout="
    )


def slow_start(w: int, pid: int | None, in_setup: bool, limit: float, timeout: float, startup_s: float) -> WorkerError:
    """Worker ``w`` is still starting after ``limit`` = ``max(timeout, startup_s)`` seconds: where, and the fix."""
    where = "is still in the source's setup_worker()" if in_setup else "has not started"
    why = "setup_worker may hang" if in_setup else "an import may hang"
    return WorkerError(
        f"worker {w} (pid {pid}) {where} after {limit:g} s (with timeout={timeout}, a "
        f"worker may take max(timeout, {startup_s:g} s) to start): {why} there, or pass a larger timeout="
    )
