"""The control block's producer reports: each producer's counters (busy seconds, steps, messages sent), its
idle flag, and its mark (the stream and step it is reading right now, written before every call into the source
that can block): what a dead worker was doing, and the progress that ``timeout=`` measures.
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.layout import CALLS, Arrays


class Reports(Arrays):
    """Per-producer counters and marks, written by the producers and read by the loader."""

    def report(self, w: int, busy: float, steps: int, stream: int, pos: int) -> None:
        """A producer's counters after a piece of work: busy seconds and steps (added), where it is reading."""
        stats = self._wstat
        stats.busy[w] += busy
        stats.steps[w] += steps
        stats.stream[w], stats.pos[w] = stream, pos

    def set_idle(self, w: int, idle: bool) -> None:
        self._wstat.idle[w] = idle

    def idle_elsewhere(self, w: int) -> bool:
        """Whether a producer other than ``w`` has nothing to do."""
        idle = self._wstat.idle
        return bool(idle.sum() - idle[w] > 0)

    def set_load(self, w: int, seconds: float) -> None:
        self._wstat.load[w] = seconds

    def load_of(self, w: int) -> float:
        """Seconds producer ``w``'s rows took in their last batch, as it said last (``fills.handover``)."""
        return float(self._wstat.load[w])

    def sent(self, w: int) -> int:
        """Messages producer ``w`` has sent over its pipe (it counts each just before sending it)."""
        return int(self._wstat.sent[w])

    def count_sent(self, w: int) -> None:
        self._wstat.sent[w] += 1

    def busy(self) -> np.ndarray:
        return self._wstat.busy.copy()

    def steps(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self._wstat.steps)

    def reading(self, w: int) -> tuple[int, int]:
        """(stream, step) producer ``w`` is reading, or was when it stopped (``mark``); stream -1 before any."""
        mark = self._mark[w]
        return int(mark[0]), int(mark[1])

    def call_of(self, w: int) -> str:
        """The source's call producer ``w`` is in (or was last in): ``open()``, ``next()`` or ``window()``."""
        return CALLS.get(int(self._mark[w][2]), "next()")

    def mark_of(self, w: int) -> np.ndarray:
        """Producer ``w``'s mark, ``[stream, step, call]``, which it writes before each call into the source."""
        mark: np.ndarray = self._mark[w]
        return mark

    def progress(self) -> tuple[int, ...]:
        """A snapshot that changes whenever any producer reads a step, opens a stream or completes a row."""
        written, done, wdone = int(self._rows.written.sum()), int(self._done.sum()), int(self._wdone.sum())
        return (*self._mark.ravel().tolist(), written, done, wdone)
