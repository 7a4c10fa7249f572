"""A local Ray instance for an export: started quiet, and its processes ended however this process ends.

Ray ties the processes this one starts to its life (PR_SET_PDEATHSIG), but not the agents its raylet starts:
after a ``kill -9`` of this process they would linger for a minute. A guard process, fed by a pipe from this one,
kills them when the pipe closes.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any


def init_local(ray: Any, num_cpus: int | None = None) -> None:
    """Start a local Ray instance that prints nothing of its own and goes away with this process.

    ``logging_level=ERROR`` keeps Ray's info and warning lines (a local instance started, token authentication)
    off the terminal, and ``log_to_driver=False`` its workers' output. Ray ties the processes this one starts to
    its life (PR_SET_PDEATHSIG), but not the agents its raylet starts: after a ``kill -9`` of this process they
    notice the raylet's death, then wait up to a minute to report it to the dead GCS. ``_guard`` ends them.
    """
    before = set(_descendants(os.getpid()))  # e.g. multiprocessing's resource tracker: not Ray's, left alone
    ray.init(
        num_cpus=num_cpus or os.cpu_count() or 1,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    guard = _guard([p for p in _descendants(os.getpid()) if p not in before])
    if guard is not None:
        _GUARDS.append(guard)  # its pipe must stay open as long as this process lives (or until release_guards)


def release_guards() -> None:
    """After ``ray.shutdown()``: let the guards exit (the processes they watch are gone)."""
    while _GUARDS:
        guard = _GUARDS.pop()
        if guard.stdin is not None:
            guard.stdin.close()
        try:
            guard.wait(timeout=5)
        except subprocess.TimeoutExpired:
            guard.kill()


_GUARDS: list[subprocess.Popen[bytes]] = []


# The guard: a small process that reads a pipe from this one until EOF, which the kernel delivers however this
# process ends (kill -9 included), then kills the processes it was given that are still the same processes
# (same start time, so a reused pid is never hit). After a clean ray.shutdown() they are gone already.
_GUARD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the driver shuts Ray down itself
targets = [tuple(map(int, a.split(":"))) for a in sys.argv[1:]]
while sys.stdin.buffer.read(4096):
    pass
for pid, start in targets:
    try:
        with open(f"/proc/{pid}/stat") as f:
            if int(f.read().rsplit(")", 1)[1].split()[19]) == start:
                os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
"""


def _guard(processes: list[tuple[int, int]]) -> subprocess.Popen[bytes] | None:
    """Start the guard over ``processes`` (pid, start time); None where ``/proc`` is missing (not Linux)."""
    if not processes:
        return None
    return subprocess.Popen(
        [sys.executable, "-c", _GUARD, *(f"{pid}:{start}" for pid, start in processes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # the pipe's write end stays open in this process until it ends


def _descendants(root: int) -> list[tuple[int, int]]:
    """Every process below ``root`` as (pid, start time), read from ``/proc``; empty where there is none."""
    parent: dict[int, int] = {}
    start: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(name)], start[int(name)] = int(fields[1]), int(fields[19])
    found: list[tuple[int, int]] = []
    todo = [root]
    while todo:
        p = todo.pop()
        for child, ppid in parent.items():
            if ppid == p:
                found.append((child, start[child]))
                todo.append(child)
    return found
