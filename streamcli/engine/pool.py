"""The loader's side of the worker processes: start them, hand out work, collect their answers.

Each worker has its own pipe. The pool waits on the pipe of the worker it needs next, with a short timeout
after which it checks every worker's liveness, so a death anywhere (which can stall the living workers too)
is reported within a second, as a ``WorkerError`` naming the worker, its exit and what it was reading.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import select
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from streamcli.engine.produce import Skip
from streamcli.engine.ring import Ring, SegmentLock
from streamcli.engine.worker import WorkerSpec, decode, describe_exit, encode_fill, worker_main
from streamcli.errors import RemoteTraceback, SourceError, StepSpecError, WorkerError

_POLL_MS = 250  # how long to wait on one pipe before checking that every worker is alive


class WorkerPool:
    """Worker processes, one contiguous block of rows each, and what each has acknowledged."""

    def __init__(self, specs: list[WorkerSpec], ring: Ring, method: str, describe: Callable[[int], str]) -> None:
        ctx: Any = mp.get_context(method)
        seg = os.path.join("/dev/shm", ring.spec.name)
        # A named semaphore would leak if the process group were killed; flock on the segment cannot.
        self._lock = SegmentLock(seg) if os.path.exists(seg) else ctx.Lock()  # alive until children unpickle
        self.ring, self.describe = ring, describe
        self.procs: list[Any] = []
        self._pollers: list[select.poll] = []
        self.conns: list[Connection] = []
        self.done = [0] * len(specs)  # per worker: batches of the current generation done (in order)
        self.ready = [0] * len(specs)  # per worker: the generation it has acknowledged
        self.gen = 0
        self.on_skip: Callable[[Skip], None] = lambda s: None
        for spec in specs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=worker_main, args=(spec, child, self._lock, os.getpid()),
                name=f"streamcli-worker-{spec.w}", daemon=True,
            )  # fmt: skip
            proc.start()
            child.close()  # only the worker holds this end: its death is EOF here
            self.procs.append(proc)
            self.conns.append(parent)
            # One poll object per pipe, made once: Connection.poll builds a selector on every call.
            poller = select.poll()
            poller.register(parent.fileno(), select.POLLIN)
            self._pollers.append(poller)

    def start_epoch(self, gen: int, first_batch: int, timeout: float | None) -> None:
        """Make every worker drop what it was doing and begin generation ``gen`` at batch ``first_batch``
        (from the cursors the loader wrote into the ring)."""
        self.gen = gen
        self.done = [first_batch] * len(self.conns)
        for w in range(len(self.conns)):
            self._send(w, ("epoch", gen))
        start = time.perf_counter()
        for w in range(len(self.conns)):
            while self.ready[w] != gen:  # older "done" messages drain here
                self._recv_from(w, start, timeout)

    def assign(self, k: int, slot: int) -> None:
        for w in range(len(self.conns)):
            self._send_bytes(w, encode_fill(self.gen, k, slot))

    def _send(self, w: int, msg: tuple[Any, ...]) -> None:
        self._send_bytes(w, pickle.dumps(msg))

    def _send_bytes(self, w: int, data: bytes) -> None:
        try:
            self.conns[w].send_bytes(data)
        except OSError:  # the worker is gone: say which, and why
            self.procs[w].join(timeout=1.0)
            self._raise_dead(w)

    def wait_done(self, k: int, timeout: float | None) -> None:
        start = time.perf_counter()
        for w in range(len(self.conns)):
            while self.done[w] <= k:
                self._recv_from(w, start, timeout)

    def ready_batches(self, k: int) -> int:
        """Batches after ``k`` that every worker has finished (read from shared memory, not the pipes)."""
        return max(0, self.ring.control.done_min() - k - 1)

    def _recv_from(self, w: int, since: float, timeout: float | None) -> None:
        conn = self.conns[w]
        if not self._pollers[w].poll(_POLL_MS):
            for v, proc in enumerate(self.procs):  # a dead worker can stall the living ones
                if proc.exitcode is not None:
                    self._raise_dead(v)
            if timeout is not None and time.perf_counter() - since > timeout:
                raise WorkerError(f"no batch from the workers for {timeout:g} s (timeout={timeout})")
            return
        try:
            msg = decode(conn.recv_bytes())
        except (EOFError, OSError):
            self.procs[w].join(timeout=1.0)
            self._raise_dead(w)
        kind, gen = msg[0], msg[1]
        if kind == "fatal":
            raise WorkerError(f"worker {w} could not start: {msg[2]}") from RemoteTraceback(msg[3])
        if gen != self.gen:
            return  # from an abandoned epoch
        if kind == "done":
            self.done[w] = msg[2] + 1
        elif kind == "ready":
            self.ready[w] = gen
        elif kind == "skip":
            self.on_skip(msg[2])
        elif kind == "error":
            cls = StepSpecError if msg[2] == "spec" else SourceError
            raise cls(msg[3]) from RemoteTraceback(msg[4])

    def _raise_dead(self, w: int) -> NoReturn:
        proc = self.procs[w]
        code, (stream, pos) = proc.exitcode, self.ring.control.reading(w)
        where = f" while reading stream {stream} ({self.describe(stream)!r}) near step {pos}"
        where = where if stream >= 0 else ""
        hint = " (SIGKILL often means the system ran out of memory: check `dmesg`)" if code == -9 else ""
        if not where and code == 1:
            hint = (
                " before reading anything: a spawned worker imports your main module again, so a script must "
                'build and iterate the loader under `if __name__ == "__main__":`, and the source\'s module must '
                "import without side effects (see the worker's traceback above)"
            )
        raise WorkerError(f"worker {w} (pid {proc.pid}) died with {describe_exit(code)}{where}{hint}")


def shutdown(pool: WorkerPool | None, ring: Ring) -> None:
    """Ask workers to quit, then make sure: nothing may outlive the loader. Runs once, from close() or GC."""
    if pool is not None:
        for conn in pool.conns:
            with contextlib.suppress(Exception):
                conn.send_bytes(pickle.dumps(("quit",)))
        deadline = time.monotonic() + 2.0
        for p in pool.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in pool.procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=2.0)
        for conn in pool.conns:
            with contextlib.suppress(Exception):
                conn.close()
    ring.close()
