"""The live view's loop for ``streamcli preview``: single keys read from the terminal, when to draw, and the loop
that pulls batches and draws them until q.

Separate from the command, which builds the loader and the screen: this knows nothing of batches or Rich, only
the callables it is given, so tests drive it with a scripted key source and a fake clock.
"""

from __future__ import annotations

import math
import os
import queue
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

RENDER_BUDGET = 0.05  # at most this fraction of the wall time goes to drawing
KEY_POLL_S = 0.05


class KeyReader:
    """Single keys from a terminal's stdin, read by a thread in cbreak mode; the mode is always restored.

    On a non-terminal stdin it reads nothing (so pipes and CI never block on it).
    """

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self.keys: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: Any = None
        try:
            self.fd = self.stream.fileno()
            self.enabled = os.isatty(self.fd)
        except (AttributeError, OSError, ValueError):
            self.fd, self.enabled = -1, False

    def __enter__(self) -> KeyReader:
        if self.enabled:
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)  # keeps ISIG: Ctrl-C still interrupts
            self._thread = threading.Thread(target=self._run, name="streamcli-keys", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if ready:
                    data = os.read(self.fd, 32)
                    if not data:
                        return
                    for ch in data.decode(errors="ignore"):
                        self.keys.put(ch)
            except OSError:
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=0.5)
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def get(self, timeout: float = 0.0) -> str | None:
        try:
            return self.keys.get(timeout=timeout) if timeout > 0 else self.keys.get_nowait()
        except queue.Empty:
            return None

    def wait(self, timeout: float) -> None:
        """Block until a key is pressed (leaving it to ``get``) or ``timeout`` s have passed."""
        key = self.get(timeout=timeout)
        if key is not None:
            self.keys.put(key)


class Keys(Protocol):
    """What ``live_loop`` reads keys from (``KeyReader``, or a script in tests)."""

    enabled: bool

    def get(self, timeout: float = 0.0) -> str | None: ...

    def wait(self, timeout: float) -> None: ...


class Pace:
    """When the live view draws: at most every ``interval`` s, and drawing takes at most ``RENDER_BUDGET`` of the
    wall time (the consumer's thread draws, so a slow terminal must not starve the loader)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.base = self.interval = interval
        self.clock = clock
        self.last = -math.inf

    def due(self) -> bool:
        return self.clock() - self.last >= self.interval

    def drawn(self, start: float) -> None:
        """A draw that began at ``start`` has just ended."""
        self.last = start
        self.interval = max(self.base, (self.clock() - start) / RENDER_BUDGET)


def live_loop(
    keys: Keys,
    pull: Callable[[bool], bool],
    render: Callable[[bool, bool], None],
    pace: Pace,
    *,
    done: bool,
    stop_when_done: bool,
) -> None:
    """The live view's keys, pulls and draws until q (or the end, with ``stop_when_done``).

    ``pull(show)`` takes the next batch (False at the end), copying its frame out when ``show`` or when a draw
    is due; ``render(paused, done)`` draws the last frame copied with the loader's counters. Batches that come
    between draws are not copied, so pausing takes one more batch and draws it at once: the paused grid is the
    batch the counters on the same screen count up to. ``n`` takes and draws one batch while paused.
    """
    paused, drawn_done = False, False
    while True:
        step = False
        while (key := keys.get()) is not None:
            if key in "qQ":
                return
            if key == " ":
                paused = not paused
                step = step or paused
            elif key in "nN":
                step = True
        if not done and (not paused or step):
            done = not pull(step)
        if pace.due() or step or (done and not drawn_done):
            start = pace.clock()
            render(paused, done)
            drawn_done = done
            pace.drawn(start)
        if done and drawn_done and stop_when_done:
            return  # --batches N stops on its own; otherwise the last frame stays until q
        if paused or done:
            keys.wait(KEY_POLL_S)
