"""A worker process: its loop, which fills the batches handed out in the ring, and its end, with its loader's.

Rare messages travel over its pipe. Main -> worker: ``("epoch", gen)``, ``("quit",)``. Worker -> main: ``("ready",
gen)``, ``("skip", gen, Skip)``, ``("error", gen, classes, message, traceback)``, counted in the control block just
before they are sent (the loader reads a pipe only when something is there), and while it starts ``("setup", -1)``,
``("started", -1)`` or ``("fatal", -1, message, traceback)``. The worker that completes the batch the loader is
blocked on writes one byte to the wake-up pipe all workers share.

A worker dies within a second of its loader, even while a source blocks it: the kernel kills it when the loader's
main thread dies (Linux's ``PR_SET_PDEATHSIG``), and a watchdog thread sees ``alive`` (a pipe only the loader
writes) close or its parent change, then unlinks the segment.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import pickle
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from streamcli import signals
from streamcli.errors import SourceError, StreamcliError, WorkerError
from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec
from streamcli.shared.control import CLOSING, Aborted
from streamcli.shared.ring import Ring
from streamcli.shared.sizing import RingSpec
from streamcli.source import StreamSource, call_setup_worker
from streamcli.trace import Tracer


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    w: int
    fill_spec: FillSpec
    ring: RingSpec
    source: StreamSource
    items: list[Any]
    # The loader's environment: a fork server's child inherits the server's, without what was set since.
    env: dict[str, str] | None = None


def worker_main(
    spec: WorkerSpec,
    conn: Connection,
    wake: Connection,
    lock: Any,
    parent_pid: int,
    alive: Connection,
    pdeathsig: bool,
    tempdir: str | None = None,
) -> None:
    # Ctrl-C reaches the whole process group; the loader decides what happens. The worker started with the stop
    # signals blocked (``signals.held``): SIGINT is ignored now, the others act as they would have.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(signals.SIGNALS))
    if spec.env is not None and os.environ != spec.env:
        os.environ.clear()
        os.environ.update(spec.env)
    if pdeathsig and sys.platform.startswith("linux"):  # the kernel's SIGKILL once the loader's main thread dies
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        # The loader died before the worker could ask to die with it, or a fork server (which exits with the loader)
        # is its parent: that child holds no write end of ``alive``, which is not readable while the loader lives.
        try:
            os.kill(parent_pid, 0)
        except OSError:  # gone, or a process of another user took the number
            return
        if alive.poll(0):
            return
        parent_pid = os.getppid()
    try:
        ring = Ring.attach(spec.ring)
        # From here on a hung source cannot keep the worker alive after its loader: the watchdog sees to it.
        threading.Thread(
            target=_watch, args=(ring, alive, parent_pid, tempdir), name="streamcli-watchdog", daemon=True
        ).start()
        if ring.control.generation == CLOSING:  # the loader closed while a large ring was being mapped
            ring.close()
            return
        conn.send(("setup", -1))  # what the loader says if this worker hangs or dies from here on
        call_setup_worker(spec.source)
        conn.send(("started", -1))  # the loader's clock for ``timeout=`` starts here, not at the spawn
    except (Exception, SystemExit) as exc:  # report why, rather than only dying with exit code 1
        conn.send(("fatal", -1, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))))
        return

    def skip(s: Any) -> None:
        send(("skip", engine.gen, s))

    engine = Filler(spec.fill_spec, spec.source, spec.items, ring, spec.w, spec.ring.num_workers, skip, lock)
    engine.rows.tracer = None if spec.fill_spec.trace is None else Tracer(spec.fill_spec.trace, f"worker {spec.w}")
    engine.busy = lambda: ring.control.set_idle(spec.w, False)  # (the balanced policy reads who is idle)

    def send(msg: tuple[Any, ...]) -> None:
        # Counted first: else a loader that saw a readable pipe it believed empty would spin.
        ring.control.count_sent(spec.w)
        conn.send(msg)

    try:
        _serve(engine, parent_pid, conn, wake.fileno(), send)
    except (EOFError, OSError):
        pass  # the loader went away; exit quietly
    finally:
        engine.end()
        ring.close()


def error_kind(exc: BaseException) -> list[tuple[str, str]]:
    """How ``exc``'s class travels to the loader (``remote_error``): a streamcli error as its streamcli classes, most
    derived first (a plugin's own subclass falls back to its base); anything else as the source's failure."""
    if not isinstance(exc, StreamcliError):
        return [(SourceError.__module__, SourceError.__qualname__)]
    return [(c.__module__, c.__qualname__) for c in type(exc).__mro__ if issubclass(c, StreamcliError)]


_PR_SET_PDEATHSIG = 1
_IDLE_SLEEP = 1e-4  # the longest nap of a briefly idle worker: how late it notices new work (longer after 0.2 s)


def _serve(
    engine: Filler, parent_pid: int, conn: Connection, wake: int, send: Callable[[tuple[Any, ...]], None]
) -> None:
    control = engine.ring.control
    os.set_blocking(wake, False)
    spins = 0
    while True:
        if control.generation != engine.gen:  # a new epoch, or closing: the pipe says which
            if not conn.poll(0.5):
                if os.getppid() != parent_pid:
                    return  # orphaned
                continue
            msg = pickle.loads(conn.recv_bytes())
            if msg[0] == "quit":
                return
            if msg[0] == "epoch":
                engine.begin(msg[1])
                send(("ready", engine.gen))
            continue
        t0, steps = time.perf_counter(), engine.steps
        try:
            did = engine.step() if control.tables_ready(engine.gen) else False
        except Aborted:
            continue
        except Exception as exc:
            tb = "".join(traceback.format_exception(exc))  # with its cause: the source's own traceback
            send(("error", engine.gen, error_kind(exc), str(exc), tb))
            engine.stop()  # produce nothing more until the next epoch
            continue
        if did:
            spins = 0
            t1 = time.perf_counter()
            control.report(engine.w, t1 - t0, engine.steps - steps)
            if engine.rows.tracer is not None:
                engine.rows.tracer.fill(t0, t1)
            if control.wake_due():
                with contextlib.suppress(BlockingIOError):  # a full pipe wakes the loader already
                    os.write(wake, b"w")
            continue
        engine.idle()
        spins += 1
        if spins % 64 == 0 and os.getppid() != parent_pid:  # a cheap syscall: an orphan exits even when napping long
            return
        # Nap rather than spin (spinning takes CPU from the other producers); after a long idle spell the naps grow.
        time.sleep(min(_IDLE_SLEEP, 2e-5 * spins) if spins < 2000 else 1e-2 if spins > 6000 else 2e-3)


def _watch(ring: Ring, alive: Connection, parent_pid: int, tempdir: str | None) -> None:
    """The watchdog thread: once ``alive`` reads end of file or the parent pid changes (re-parented, where workers
    inherit the writing end), unlink the segment and exit. Where the loader itself died (``alive`` closed: a kill
    that ran none of its cleanup), also remove the fork server's ``pymp-*`` folder, ``tempdir``."""
    while True:
        try:
            if alive.poll(0.5):
                alive.recv_bytes()  # nothing is ever sent: this raises EOFError once the writer is gone
        except (EOFError, OSError):
            break
        if os.getppid() != parent_pid:
            break
    with contextlib.suppress(BaseException):
        ring.shm.unlink()
        if tempdir is not None and os.path.basename(tempdir).startswith("pymp-") and alive.poll(0):
            shutil.rmtree(tempdir, ignore_errors=True)
    os._exit(1)


# How a worker's end reads in the loader: one ``WorkerError`` line for a death, a stall or a start-up past its
# limit, and a worker's own error raised again as the class it had.


def describe_exit(exitcode: int | None) -> str:
    """'signal SIGKILL' or 'exit code 3'."""
    if exitcode is None:
        return "no exit code"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def remote_error(classes: list[tuple[str, str]], message: str) -> StreamcliError:
    """A worker's error as the first class it named (``error_kind``) that this process has too, so that ``except
    TransformError`` catches it with workers as without; failing every one, ``SourceError``."""
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
    """Worker ``w`` has died: its exit, where it was (``reading``: stream and position, the stream -1 if none) and
    the likely fix. ``before_reading``: it died while spawning, having read no step."""
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
    """Where each worker is (``readings``: stream, step, the source's call)."""
    return "; ".join(
        f"worker {w} near step {pos} of stream {stream} ({describe(stream)!r}), in the source's {call}"
        for w, (stream, pos, call) in enumerate(readings)
        if stream >= 0
    )


def stalling(seconds: float, readings: list[tuple[int, int, str]], describe: Callable[[int], str]) -> str:
    """The warning for a stall with ``timeout=None``: the loader keeps waiting."""
    where = _where(readings, describe) or "no worker is inside the source"
    return (
        f"the workers have read no step for {seconds:.0f} s without progress: {where}; timeout=None waits for as "
        "long as it takes (a network mount or a remote store may answer later): pass timeout=SECONDS to make a "
        "stall an error"
    )


def stalled(timeout: float, readings: list[tuple[int, int, str]], describe: Callable[[int], str]) -> WorkerError:
    """The workers read no step for ``timeout`` seconds."""
    where = _where(readings, describe)
    return WorkerError(
        f"the workers read no step for {timeout:g} s (timeout={timeout})"
        + (f": {where}" if where else "")
        + "; a source may hang there, or pass a larger timeout="
    )


def slow_start(w: int, pid: int | None, in_setup: bool, limit: float, timeout: float, startup_s: float) -> WorkerError:
    """Worker ``w`` is still starting after ``limit`` = ``max(timeout, startup_s)`` seconds."""
    where = "is still in the source's setup_worker()" if in_setup else "has not started"
    why = "setup_worker may hang" if in_setup else "an import may hang"
    return WorkerError(
        f"worker {w} (pid {pid}) {where} after {limit:g} s (with timeout={timeout}, a "
        f"worker may take max(timeout, {startup_s:g} s) to start): {why} there, or pass a larger timeout="
    )
