"""The loader's side of the worker processes: start them, wait for batches, collect their rare messages.

Work goes through shared memory (``control.Control``); the pool watches completion, reads a worker's pipe when the
worker has counted a message there, and checks liveness a few times a second while it waits, so a death is reported
within a second as a ``WorkerError`` naming the worker, its exit and what it was reading. ``timeout=`` counts from
the moment every worker has started; a start-up has its own limit, ``max(timeout, STARTUP_S)``.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import threading
import time
import warnings
from collections.abc import Callable
from multiprocessing import util
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from streamcli import signals
from streamcli.errors import RemoteTraceback, WorkerError
from streamcli.fills.spec import Skip
from streamcli.shared.control import CLOSING, Aborted
from streamcli.shared.ring import Ring
from streamcli.shared.segment import SegmentLock
from streamcli.workers.start import start_context
from streamcli.workers.worker import WorkerSpec, died, remote_error, slow_start, stalled, stalling, worker_main

_POLL_MS = 250  # how long to wait on one pipe before checking that every worker is alive
_HUP = select.POLLHUP | select.POLLERR
# The longest block between two checks of the batch: what a lost wake-up costs (the mark and the count are plain
# stores in shared memory: in rare races each side misses the other's). Each timeout is a wake-up taken from a worker.
_WAKE_MS = 20
# With ``timeout=``, the longest a worker may take to start: a plugin's setup_worker may load a model, and the
# imports of a spawned worker alone take seconds on a loaded machine. A larger timeout= raises it.
STARTUP_S = 120.0
# With ``timeout=None`` (wait without limit), a stall this long is named in one warning, and the wait goes on.
STALL_WARN_S = float(os.environ.get("STREAMCLI_STALL_WARN_S", "30"))
_SPAWNING, _IN_SETUP, _STARTED = 0, 1, 2  # a worker's start-up, as its messages tell it (``worker_main``)


class WorkerPool:
    """Worker processes and what each has said."""

    def __init__(self, specs: list[WorkerSpec], ring: Ring, method: str, describe: Callable[[int], str]) -> None:
        ctx: Any = start_context(method)
        # The fork server's folder in $TMPDIR: the loader removes it at exit; a worker's watchdog if it is killed.
        tempdir = util.get_temp_dir() if ctx.get_start_method() == "forkserver" else None
        seg = os.path.join("/dev/shm", ring.spec.name)
        # A named semaphore would leak if the process group were killed; flock on the segment cannot.
        self._lock = SegmentLock(seg) if os.path.exists(seg) else ctx.Lock()  # alive until children unpickle
        self.ring, self.describe = ring, describe
        self.procs: list[Any] = []
        self._pollers: list[select.poll] = []
        self._poll_all = select.poll()  # the wake-up pipe and every worker's own pipe (a skip or an error)
        self._wake, wake = ctx.Pipe(duplex=False)  # every worker writes a byte here when the awaited batch is whole
        self._wake_fd = self._wake.fileno()
        os.set_blocking(self._wake_fd, False)
        self._poll_all.register(self._wake_fd, select.POLLIN)
        self.conns: list[Connection] = []
        self.ready = [0] * len(specs)  # per worker: the generation it has acknowledged
        self.received = [0] * len(specs)  # per worker: messages read from its pipe
        self.phase = [_SPAWNING] * len(specs)  # per worker: how far its start-up went
        self.spawned = self.started_at = time.perf_counter()  # when the workers were started; the last started
        self.gen = 0
        self.on_skip: Callable[[Skip], None] = lambda s: None
        self._stall = _Stall(self)  # one for the loader's life: each wait only restarts its clock
        # Only this process writes to ``alive`` (never: its end of file tells a worker the loader is gone).
        alive, self._alive = ctx.Pipe(duplex=False)
        # The kernel's parent-death signal follows the thread that started a worker: only the main thread lives as
        # long as the process (``workers.worker``).
        pdeathsig = threading.current_thread() is threading.main_thread()
        # Ctrl-C reaches the process group, and a spawned worker would die of it, mid-import, with a traceback: it
        # starts with SIGINT blocked (inherited through fork and exec), and here the handlers wait (``signals.held``)
        # until every worker has started whole.
        try:
            with signals.held():
                for spec in specs:
                    parent, child = ctx.Pipe()
                    proc = ctx.Process(
                        target=worker_main,
                        args=(spec, child, wake, self._lock, os.getpid(), alive, pdeathsig, tempdir),
                        name=f"streamcli-worker-{spec.w}",
                        daemon=True,
                    )
                    proc.start()
                    child.close()  # only the worker holds this end: its death is EOF here
                    self.procs.append(proc)
                    self.conns.append(parent)
                    # One poll object per pipe, made once (Connection.poll builds a selector on every call).
                    poller = select.poll()
                    poller.register(parent.fileno(), select.POLLIN)
                    self._pollers.append(poller)
                    self._poll_all.register(parent.fileno(), select.POLLIN)
        except BaseException:  # that Ctrl-C, say: nothing started may outlive the error
            for proc in self.procs:
                proc.kill()
                proc.join(timeout=2.0)
            for conn in (*self.conns, self._wake, wake, self._alive, alive):
                conn.close()
            raise
        wake.close()  # only workers write: once all are gone, the pipe reads as hung up
        alive.close()

    def start_epoch(self, gen: int, timeout: float | None) -> None:
        """Make every worker drop what it was doing and begin generation ``gen`` (the loader has set it in the
        control block and written the cursors); returns once every worker has acknowledged."""
        self.gen = gen
        for w in range(len(self.conns)):
            self._send(w, ("epoch", gen))
        stall = self._stall.restart(timeout)  # a worker acknowledges once its work in hand is done: it may be reading
        for w in range(len(self.conns)):
            while self.ready[w] != gen:  # older messages drain here
                self._recv_from(w, stall)

    def _send(self, w: int, msg: tuple[Any, ...]) -> None:
        try:
            self.conns[w].send_bytes(pickle.dumps(msg))
        except OSError:  # the worker is gone: say which, and why
            self.procs[w].join(timeout=1.0)
            self._read_pending(w)  # it may have said why before it went (``fatal``), or where it was
            self._raise_dead(w)

    def wait_batch(self, k: int, timeout: float | None, stop: Callable[[], bool] | None = None) -> bool:
        """Return once batch ``k`` is whole, with every message the workers sent before it handled, and whether
        that meant waiting; raises ``Aborted`` if ``stop()`` says the consumer has gone. It blocks on the workers'
        pipes, not in a spin (a spinning loader takes CPU from the workers)."""
        control = self.ring.control
        if control.batch_done(k):  # the common case when the consumer is the slower side: no clock, no syscall
            self.drain()
            return False
        stall = self._stall.restart(timeout)
        check = stall.since
        control.await_batch(k)  # the producer that completes it clears the mark and writes the wake-up byte
        while not control.batch_done(k):  # (completed before the mark was seen, or since the last wake-up)
            if stop is not None and stop():
                raise Aborted
            events = self._poll_all.poll(_WAKE_MS)
            woken = False
            for fd, _ in events:
                if fd == self._wake_fd:
                    woken = True
                    with contextlib.suppress(BlockingIOError):
                        os.read(fd, 4096)  # every wake-up byte so far: the loop checks the batch itself
            if woken and len(events) == 1:
                continue
            now = time.perf_counter()
            # A dead worker's pipe reads as hung up at once: check liveness then, and a few times a second.
            if not events or now - check > _POLL_MS / 1000 or any(ev & _HUP for _, ev in events):
                check = now
                self._check_alive()
                stall.check(now)
            self.drain()  # a worker's message (an error ends its work: the batch would never be whole)
            control.await_batch(k)
        control.await_batch(-1)
        self.drain()  # a skip is counted before the row it happened in is done
        return True

    def drain(self) -> None:
        """Read every message a worker has counted as sent (errors raise here)."""
        control = self.ring.control
        for w in range(len(self.conns)):
            while self.received[w] < control.sent(w):
                self._recv_from(w, None)

    def ready_batches(self, k: int) -> int:
        """Batches after ``k`` that are already whole (read from shared memory)."""
        return self.ring.control.done_after(k)

    def _check_alive(self) -> None:
        for v, proc in enumerate(self.procs):  # a dead worker can stall the living ones
            if proc.exitcode is not None:
                self._read_pending(v)
                self._raise_dead(v)

    def all_started(self, now: float, timeout: float) -> bool:
        """Whether every worker has started; raises ``WorkerError`` for one still starting past the start-up's
        limit (``max(timeout, STARTUP_S)`` since the spawn)."""
        if all(phase == _STARTED for phase in self.phase):
            return True
        limit = max(timeout, STARTUP_S)
        for w, phase in enumerate(self.phase):
            if phase != _STARTED:
                self._read_pending(w)  # it may have started while the loader read another worker's pipe
            if self.phase[w] != _STARTED and now - self.spawned > limit:
                raise slow_start(w, self.procs[w].pid, self.phase[w] == _IN_SETUP, limit, timeout, STARTUP_S)
        return False

    def _read_pending(self, w: int) -> None:
        """Read what a worker has sent so far: where a starting worker is, or what a dead one managed to send (a
        fatal error explains its death better than its exit)."""
        with contextlib.suppress(EOFError, OSError):
            while self.conns[w].poll(0):
                self._handle(w, pickle.loads(self.conns[w].recv_bytes()))

    def _recv_from(self, w: int, stall: _Stall | None) -> None:
        conn = self.conns[w]
        if not self._pollers[w].poll(_POLL_MS):
            self._check_alive()
            if stall is not None:
                stall.check(time.perf_counter())
            return
        try:
            msg = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            self.procs[w].join(timeout=1.0)
            self._raise_dead(w)
        self._handle(w, msg)

    def _handle(self, w: int, msg: tuple[Any, ...]) -> None:
        kind, gen = msg[0], msg[1]
        if kind in ("setup", "started"):  # not counted in the control block: sent before the worker serves
            self.phase[w] = _IN_SETUP if kind == "setup" else _STARTED
            if kind == "started":
                self.started_at = time.perf_counter()
            return
        if kind == "fatal":
            what = "its source's setup_worker() raised " if self.phase[w] == _IN_SETUP else ""
            raise WorkerError(f"worker {w} could not start: {what}{msg[2]}") from RemoteTraceback(msg[3])
        self.received[w] += 1
        if gen != self.gen:
            return  # from an abandoned epoch
        if kind == "ready":
            self.ready[w] = gen
        elif kind == "skip":
            self.on_skip(msg[2])
        elif kind == "error":
            raise remote_error(msg[2], msg[3]) from RemoteTraceback(msg[4])

    def _raise_dead(self, w: int) -> NoReturn:
        proc, control = self.procs[w], self.ring.control
        in_setup, before_reading = self.phase[w] == _IN_SETUP, self.phase[w] == _SPAWNING and not control.steps()[w]
        raise died(w, proc.pid, proc.exitcode, control.reading(w), self.describe, in_setup, before_reading)


class _Stall:
    """``timeout=``: seconds without progress (``Control.progress``), counted from a wait's start once every worker
    has started; ``check`` raises ``WorkerError`` past it. With ``timeout=None`` it warns once after
    ``STALL_WARN_S`` seconds, and the wait goes on. Made once per pool: a wait only restarts its clock."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.timeout: float | None = None
        self.seen: tuple[int, ...] = ()  # the progress at the last check: progress differs from it at the first
        self.since = time.perf_counter()
        self.warned = False

    def restart(self, timeout: float | None) -> _Stall:
        """A wait begins now."""
        self.timeout, self.since, self.warned = timeout, time.perf_counter(), False
        return self

    def check(self, now: float) -> None:
        if not self.pool.all_started(now, math.inf if self.timeout is None else self.timeout):
            return
        self.since = max(self.since, self.pool.started_at)  # the clock starts once the last worker has started
        progress = self.pool.ring.control.progress()
        if progress != self.seen:
            self.seen, self.since = progress, now
        elif self.timeout is not None and now - self.since > self.timeout:
            raise stalled(self.timeout, self._readings(), self.pool.describe)
        elif self.timeout is None and not self.warned and now - self.since > STALL_WARN_S:
            self.warned = True
            message = stalling(now - self.since, self._readings(), self.pool.describe)
            warnings.warn(message, RuntimeWarning, stacklevel=2)

    def _readings(self) -> list[tuple[int, int, str]]:
        control = self.pool.ring.control
        return [(*control.reading(w), control.call_of(w)) for w in range(len(self.pool.procs))]


def shutdown(pool: WorkerPool | None, ring: Ring) -> None:
    """Ask workers to quit, then make sure: nothing may outlive the loader. Runs once, from close() or GC."""
    if pool is not None:
        with contextlib.suppress(Exception):
            ring.control.set_generation(CLOSING)  # busy workers stop and read their pipe
        for conn in pool.conns:
            with contextlib.suppress(Exception):
                conn.send_bytes(pickle.dumps(("quit",)))
        for w, p in enumerate(pool.procs):
            with contextlib.suppress(Exception):
                pool._read_pending(w)  # whether it has started meanwhile
            if pool.phase[w] == _SPAWNING and p.is_alive():
                p.kill()  # still importing, or mapping the ring: nothing of its own to close, and deaf until done
        deadline = time.monotonic() + 2.0
        for p in pool.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in pool.procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=2.0)
        for conn in (*pool.conns, pool._wake, pool._alive):  # ``_alive`` last: workers that see it close exit
            with contextlib.suppress(Exception):
                conn.close()
    ring.close()
