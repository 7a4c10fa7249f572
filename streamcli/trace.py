"""A Chrome / Perfetto trace of a loader (``StreamLoader(trace=FILE)``): complete events (``ph: "X"``) of its
producers and its consumer, merged into one ``{"traceEvents": [...]}`` file when the loader closes.

Each process records its own events: the main process in memory, each worker in a part file beside the trace
(``FILE.part-PID``, appended every ``FLUSH_EVERY`` events and when the worker ends), which ``merge`` gathers and
deletes. Times are ``time.perf_counter`` (the system-wide monotonic clock on Linux, so the processes agree), in
microseconds.

The events:

- ``fill`` (a producer, per batch, its part of it): split into ``plan`` (from the fill's start to its first read:
  the batch planned, its flags written), ``read`` (a row or block of rows: each step read from the source and
  copied into the shared slot as it comes, so reading and copying are one loop, one event), ``open`` (a stream
  opened at a position, inside a read) and ``write`` (after the last read: the rows' cursors written and the
  rows marked done);
- ``wait`` (the consumer, per batch): the time inside ``next()``, on the consumer's thread;
- ``stall`` (the hand-out, per batch it had to wait for): the producers had not finished the batch yet;
- ``row move`` (a producer): a row given to, or handed over to, an idle producer (``balance``).

Tracing off costs one ``is not None`` test per batch and per stream opened: every hook is behind one.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time
from typing import Any

FLUSH_EVERY = 4096


def now() -> float:
    return time.perf_counter()


class Tracer:
    """The events of one process (``role``: "consumer" or "worker W"), for the trace at ``path``."""

    def __init__(self, path: str | os.PathLike[str], role: str) -> None:
        self.path, self.role, self.pid = str(path), role, os.getpid()
        self.parted = role != "consumer"  # a worker's events go to its part file; the consumer's stay in memory
        self.events: list[dict[str, Any]] = []  # metadata, and complete events once made JSON-ready
        self._spans: list[tuple[str, float, float, int, dict[str, Any] | None]] = []  # kept raw: cheap to record
        self._named: set[int] = set()
        self._fill: tuple[float, float, int] | None = None  # (first read's start, last read's end, batch)
        self._meta("process_name", 0, role if role == "consumer" else f"streamcli {role}")

    def _meta(self, name: str, tid: int, value: str) -> None:
        self.events.append({"ph": "M", "name": name, "pid": self.pid, "tid": tid, "args": {"name": value}})

    def _tid(self) -> int:
        tid = threading.get_native_id()
        if tid not in self._named:
            self._named.add(tid)
            self._meta("thread_name", tid, threading.current_thread().name)
        return tid

    def complete(self, name: str, t0: float, t1: float, args: dict[str, Any] | None = None) -> None:
        """A complete event from ``t0`` to ``t1`` (``now()`` times) on the calling thread."""
        tid = threading.get_native_id()
        if tid not in self._named:
            self._tid()
        self._spans.append((name, t0, t1, tid, args))
        if len(self._spans) >= FLUSH_EVERY and self.parted:
            self.flush()

    def _ready(self) -> list[dict[str, Any]]:
        """Every event recorded so far as JSON-ready dicts (then forgotten here)."""
        pid, spans, self._spans = self.pid, self._spans, []
        made = [
            {"ph": "X", "name": name, "cat": "streamcli", "ts": t0 * 1e6, "dur": max(t1 - t0, 0.0) * 1e6, "pid": pid,
             "tid": tid, "args": args or {}}
            for name, t0, t1, tid, args in spans
        ]  # fmt: skip
        events, self.events = self.events + made, []
        return events

    def read(self, k: int, t0: float, t1: float, rows: int) -> None:
        """Rows of batch ``k`` read (and copied into the slot)."""
        self.complete("read", t0, t1, {"batch": k, "rows": rows})
        first = self._fill[0] if self._fill is not None else t0
        self._fill = (first, t1, k)

    def fill(self, t0: float, t1: float) -> None:
        """A producer's fill of one batch (its part of it), from ``t0`` to ``t1``, around the reads since the last."""
        reads, self._fill = self._fill, None
        if reads is None:
            self.complete("fill", t0, t1)
            return
        first, last, k = reads
        self.complete("fill", t0, t1, {"batch": k})
        self.complete("plan", t0, first, {"batch": k})
        self.complete("write", last, t1, {"batch": k})

    def clear_parts(self) -> None:
        """Delete part files left by an earlier run that was killed before it could merge them."""
        for part in glob.glob(glob.escape(self.path) + ".part-*"):
            with contextlib.suppress(OSError):
                os.remove(part)

    def flush(self) -> None:
        """Append the events so far to this process's part file (a worker's)."""
        events = self._ready()
        with open(f"{self.path}.part-{self.pid}", "a") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)

    def merge(self) -> None:
        """Write the trace: this process's events and every part file's, which are then deleted."""
        events = self._ready()
        parts = sorted(glob.glob(glob.escape(self.path) + ".part-*"))
        for part in parts:
            with open(part) as f:
                events.extend(json.loads(line) for line in f if line.strip())
        with open(self.path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
        for part in parts:
            with contextlib.suppress(OSError):
                os.remove(part)
