"""The worker process: produces batches as they are handed out, through shared memory.

A worker takes work from the control block (``produce.work``): batches handed out by the loader's counter,
rows waiting for a claim, its own rows. Only rare messages travel over its pipe. Main -> worker:
``("epoch", gen)``, ``("quit",)``. Worker -> main: ``("ready", gen)``, ``("skip", gen, Skip)``,
``("error", gen, classes, message, traceback)``, and while it starts: ``("setup", -1)`` before its source's
``setup_worker``, ``("started", -1)`` after it, or ``("fatal", -1, message, traceback)`` when the worker cannot
start (``setup_worker`` failed, or the segment is gone); the loader reads these while it waits for the first
epoch's ``ready``. The worker counts every other message in the control block just before sending it, so the
loader reads its pipe only when something is (or is about to be) there. When the loader is blocked on the batch
a worker just completed, the worker writes one byte to the wake-up pipe that all workers share: one ``write`` for
the worker and one ``read`` for the loader, with no framing and no pickle, for most batches.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import shutil
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from streamcli import signals
from streamcli.errors import SourceError, StreamcliError
from streamcli.fills.planned import Filler
from streamcli.fills.spec import FillSpec
from streamcli.shared.control import CLOSING, Aborted
from streamcli.shared.ring import Ring
from streamcli.shared.sizing import RingSpec
from streamcli.source import StreamSource, call_setup_worker
from streamcli.trace import Tracer
from streamcli.workers.watchdog import die_with_parent, watch_parent


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    w: int
    fill_spec: FillSpec
    ring: RingSpec
    source: StreamSource
    items: list[Any]
    # The loader's environment when it started the worker: a forked server's child inherits the server's, from
    # when it started (credentials or endpoints set since would be missing); spawn's child has it already.
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
    # Ctrl-C reaches the whole process group; the loader in the main process decides what happens. The worker
    # started with the stop signals blocked (``WorkerPool``, ``signals.held``): SIGINT is ignored now (one that
    # came meanwhile is dropped), the others act as they would have.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(signals.SIGNALS))
    if spec.env is not None and os.environ != spec.env:
        os.environ.clear()
        os.environ.update(spec.env)
    if pdeathsig:
        die_with_parent()
    if os.getppid() != parent_pid:
        # Either the loader died before the worker could ask to die with it, or a fork server started the worker:
        # its parent is the server, which exits with the loader. The server's child holds no write end of
        # ``alive``, so while the loader lives the pipe is not readable (never written, not closed).
        if not _exists(parent_pid) or alive.poll(0):
            return
        parent_pid = os.getppid()
    try:
        ring = Ring.attach(spec.ring)
        # From here on a hung source cannot keep the worker alive after its loader: the watchdog sees to it.
        watch_parent(alive, parent_pid, functools.partial(_after_loader, ring, alive, tempdir))
        if ring.control.generation == CLOSING:  # the loader closed while a large ring was being mapped
            ring.close()
            return
        conn.send(("setup", -1))  # what the loader says if this worker hangs or dies from here on
        _setup(spec.source)
        conn.send(("started", -1))  # the loader's clock for ``timeout=`` starts here, not at the spawn
    except (Exception, SystemExit) as exc:  # report why, rather than only dying with exit code 1
        conn.send(("fatal", -1, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))))
        return
    engine = Filler(
        spec.fill_spec,
        spec.source,
        spec.items,
        ring,
        spec.w,
        spec.ring.num_workers,
        lambda s: send(("skip", engine.gen, s)),
        lock,
    )
    engine.tracer = None if spec.fill_spec.trace is None else Tracer(spec.fill_spec.trace, f"worker {spec.w}")
    engine.busy = lambda: ring.control.set_idle(spec.w, False)  # (the balanced policy reads who is idle)

    def send(msg: tuple[Any, ...]) -> None:
        # Count first: a writer descheduled between the two would leave the loader seeing a readable pipe it
        # believes empty, and spinning; counted first, the loader blocks on the pipe until the message is there.
        ring.control.count_sent(spec.w)
        conn.send(msg)

    try:
        _serve(engine, parent_pid, conn, wake.fileno(), send)
    except (EOFError, OSError, Orphaned):
        pass  # the loader went away; exit quietly
    finally:
        engine.end()
        ring.close()


def error_kind(exc: BaseException) -> list[tuple[str, str]]:
    """How the loader names ``exc``'s class (``failures.remote_error``): a streamcli error travels as its class and
    the streamcli classes it derives from, most derived first (a ``TransformError`` stays one, a plugin's own
    subclass falls back to its base); anything else as the source's failure."""
    if not isinstance(exc, StreamcliError):
        return [(SourceError.__module__, SourceError.__qualname__)]
    return [(c.__module__, c.__qualname__) for c in type(exc).__mro__ if issubclass(c, StreamcliError)]


def _setup(source: StreamSource) -> None:
    call_setup_worker(source)


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
                _check_parent(parent_pid)
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
            if engine.tracer is not None:
                engine.tracer.fill(t0, t1)
            if control.wake_due():
                with contextlib.suppress(BlockingIOError):  # a full pipe wakes the loader already
                    os.write(wake, b"w")
            continue
        engine.idle()
        spins += 1
        if spins % 64 == 0:
            _check_parent(parent_pid)  # a cheap syscall: an orphaned worker exits soon even when napping long
        # Nap rather than spin: on a machine with as many cores as producers, spinning takes CPU from them. After
        # a long idle spell (the consumer pauses to evaluate, say) the naps grow, so idling costs next to nothing.
        time.sleep(min(_IDLE_SLEEP, 2e-5 * spins) if spins < 2000 else 1e-2 if spins > 6000 else 2e-3)


class Orphaned(BaseException):
    """The loader's process is gone: the worker stops (not an ``Exception``, so no error report catches it)."""


def _after_loader(ring: Ring, alive: Connection, tempdir: str | None) -> None:
    """The watchdog's last act once the loader is gone: unlink the segment and, where the loader itself died (its
    end of ``alive`` closed: a kill that ran none of its cleanup), the fork server's folder in ``$TMPDIR``
    (``tempdir``, multiprocessing's ``pymp-*``), which only the loader's exit would have removed."""
    ring.shm.unlink()
    if tempdir is not None and os.path.basename(tempdir).startswith("pymp-") and alive.poll(0):
        shutil.rmtree(tempdir, ignore_errors=True)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user took the number
        return False
    return True


def _check_parent(parent_pid: int) -> None:
    if os.getppid() != parent_pid:
        raise Orphaned


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
