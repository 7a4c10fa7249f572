"""The worker process: receives (batch, slot) assignments over a pipe and fills its rows of that slot.

Messages are tiny records; the arrays never leave shared memory. Main -> worker: ``("epoch", gen)``,
``("fill", gen, k, slot)``, ``("quit",)``. Worker -> main: ``("ready", gen)``, ``("done", gen, k)``,
``("skip", gen, Skip)``, ``("error", gen, kind, message, traceback)``, and ``("fatal", -1, message, traceback)``
when the worker cannot start (its source's ``setup_worker`` failed, or the segment is gone).
"""

from __future__ import annotations

import pickle
import signal
import struct
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from streamcli.engine.produce import Aborted, Plan, Producer, begin_epoch, close_rows, fill_batch, new_rows
from streamcli.engine.ring import Ring, RingSpec
from streamcli.errors import StepSpecError
from streamcli.source import StreamSource, call_setup_worker, uses_blocks


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    w: int
    lo: int  # first row owned
    hi: int  # one past the last row owned
    plan: Plan
    ring: RingSpec
    source: StreamSource
    items: list[Any]


def worker_main(spec: WorkerSpec, conn: Connection, lock: Any, parent_pid: int) -> None:
    # Ctrl-C reaches the whole process group; the loader in the main process decides what happens.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ring = Ring.attach(spec.ring)
        _setup(spec.source)
    except Exception as exc:  # report why, rather than only dying with exit code 1
        conn.send(("fatal", -1, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc))))
        return
    others = np.array([v for v in range(spec.ring.num_workers) if v != spec.w], np.int64)
    p = Producer(
        plan=spec.plan, source=spec.source, items=spec.items, ring=ring, w=spec.w,
        rows=new_rows(spec.lo, spec.hi), lock=lock, gen=-1, parent_pid=parent_pid, others=others,
        blocks=uses_blocks(spec.source),
    )  # fmt: skip
    p.on_skip = lambda s: conn.send(("skip", p.gen, s))
    try:
        _serve(p, conn)
    except (EOFError, OSError, SystemExit):
        pass  # the loader went away; exit quietly
    finally:
        close_rows(p.rows)
        ring.close()


def _setup(source: StreamSource) -> None:
    call_setup_worker(source)


def _serve(p: Producer, conn: Connection) -> None:
    while True:
        msg = decode(conn.recv_bytes())
        if msg[0] == "quit":
            return
        if msg[0] == "epoch":
            begin_epoch(p, msg[1])
            conn.send(("ready", p.gen))
            continue
        _, gen, k, slot = msg
        if gen != p.gen:
            continue  # an assignment from an abandoned epoch
        try:
            fill_batch(p, slot, k)
        except Aborted:
            continue
        except Exception as exc:
            kind = "spec" if isinstance(exc, StepSpecError) else "source"
            tb = "".join(traceback.format_exception(exc))  # with its cause: the source's own traceback
            conn.send(("error", gen, kind, str(exc), tb))
            continue
        conn.send_bytes(encode_done(gen, k))


# The two messages of every batch, "fill" (main -> worker) and "done" (worker -> main), travel as fixed
# binary records: pickling them cost the main process about a fifth of its per-batch time. Rare messages
# are pickled; a pickle starts with b"\x80", so the two never look alike.
_RECORD = struct.Struct("<4sqqq")


def encode_fill(gen: int, k: int, slot: int) -> bytes:
    return _RECORD.pack(b"fill", gen, k, slot)


def encode_done(gen: int, k: int) -> bytes:
    return _RECORD.pack(b"done", gen, k, 0)


def decode(data: bytes) -> tuple[Any, ...]:
    """A message from either side: a binary record or a pickled tuple."""
    if len(data) == _RECORD.size and data[:1] != b"\x80":
        kind, gen, k, slot = _RECORD.unpack(data)
        return (kind.decode(), gen, k, slot)
    msg: tuple[Any, ...] = pickle.loads(data)
    return msg


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
