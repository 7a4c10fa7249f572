"""How worker processes start (the default, ``config.DEFAULT_START_METHOD``: a fork server on Linux, spawn elsewhere).

A spawned worker is a fresh interpreter that imports streamcli, numpy and the caller's main module before it can
read a step. Under the fork server those imports happen once, in a clean server process started on first use
(no threads, no CUDA, nothing of the caller's state but its main module, imported under a main guard as with
spawn), and every worker is a fork of it: the start-up of a worker is then a fork and the source's own imports.
This is also CPython's default from 3.14 on Linux. macOS keeps spawn, as CPython does there.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import multiprocessing.forkserver
import os
import tempfile
from multiprocessing import spawn
from multiprocessing.context import BaseContext

from streamcli.workers import server_main

# Imported once by the fork server, so that a worker forked from it has them already. ``server_folder`` first: the
# server removes its folder in $TMPDIR when it exits after its loader was killed. Then the caller's main module
# (``server_main``; CPython's own ``__main__`` preload is kept for the versions where it works), then the worker.
_PRELOAD = [
    "streamcli.workers.server_folder",
    "__main__",
    "streamcli.workers.server_main",
    "streamcli.workers.worker",
]

# What the server needs of ``spawn.get_preparation_data`` to import the main module as a spawned child would.
_PREPARED = ("sys_path", "sys_argv", "dir", "orig_dir", "init_main_from_name", "init_main_from_path")

# The fork server listens on a Unix socket under multiprocessing's temporary folder (in $TMPDIR); a socket's
# path holds at most 107 bytes on Linux, and the file's own name takes about 20 of them.
_SOCKET_PATH_MAX = 107 - 20


def _temp_dir() -> str:
    """The path multiprocessing's temporary folder has (``pymp-`` and 8 characters under $TMPDIR), without making
    it: ``util.get_temp_dir()`` would, and with spawn nothing uses it, so nobody would remove it after a kill."""
    return os.path.join(tempfile.gettempdir(), "pymp-xxxxxxxx")


def start_context(method: str) -> BaseContext:
    """The multiprocessing context for ``method``; for the fork server, with streamcli's worker preloaded.

    The preload list is the process's one fork server's: it takes effect only if the server has not started yet
    (another library may have started it; workers then import what they need themselves). Where $TMPDIR is too
    long a path for the server's socket, workers are spawned instead (Python 3.13 picks a shorter folder itself)."""
    if method == "forkserver" and len(os.fsencode(_temp_dir())) > _SOCKET_PATH_MAX:
        method = "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
        _start_server()
    return ctx


def _start_server() -> None:
    """Start the process's fork server now, if it is not running, with the main module for ``server_main``.

    The variable is set only while the server starts: the server reads it and removes it, and nothing started
    later by this process sees it."""
    data = spawn.get_preparation_data("streamcli")
    keep = {k: data[k] for k in _PREPARED if k in data}
    os.environ[server_main.ENV] = json.dumps(keep)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.environ.pop(server_main.ENV, None)
