"""Before a worker starts: its start method, the fork server, and the checks that refuse what a worker could not
run. Under the fork server (the default on Linux; spawn elsewhere) a worker's imports happen once, in a clean server
process with the caller's main module imported as with spawn, and every worker is a fork of it.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing as mp
import multiprocessing.forkserver
import os
import pickle
import sys
import tempfile
from collections.abc import Sequence
from multiprocessing import spawn, util
from multiprocessing.context import BaseContext
from typing import Any

from streamcli.errors import LoaderUsageError
from streamcli.fills.spec import FillSpec, short_repr
from streamcli.source import StreamSource
from streamcli.workers.server import ENV

# What the fork server imports once, so that a worker forked from it has them (``workers.server`` first: it
# imports the caller's main module; CPython's own ``__main__`` preload is kept for the versions where it works).
_PRELOAD = ["streamcli.workers.server", "__main__", "streamcli.workers.worker"]
# What the server needs of ``spawn.get_preparation_data`` to import the main module as a spawned child would.
_PREPARED = ("sys_path", "sys_argv", "dir", "orig_dir", "init_main_from_name", "init_main_from_path")
# The server's socket lives in multiprocessing's ``pymp-xxxxxxxx`` folder under $TMPDIR; a socket's path holds at
# most 107 bytes on Linux, and the file's own name takes about 20 of them.
_SOCKET_PATH_MAX = 107 - 20


def start_context(method: str) -> BaseContext:
    """The multiprocessing context for ``method``; for the fork server, started now with streamcli's worker
    preloaded (unless the process's one server runs already), or spawn where $TMPDIR is too long for its socket."""
    temp = os.path.join(tempfile.gettempdir(), "pymp-xxxxxxxx")  # not ``util.get_temp_dir()``, which makes it
    if method == "forkserver" and len(os.fsencode(temp)) > _SOCKET_PATH_MAX:
        method = "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
        data = spawn.get_preparation_data("streamcli")
        prepared = {k: data[k] for k in _PREPARED if k in data}
        os.environ[ENV] = json.dumps({**prepared, "tempdir": util.get_temp_dir()})  # the server's socket is there
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.pop(ENV, None)
    return ctx


def check_main_guard() -> None:
    """Refuse a loader built at the top level of a script without a main guard: spawned workers import the main
    module again and would build a loader each, which fails there with a message that blames nobody."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or not str(path).endswith(".py"):
        return  # an interactive session, python -c, a notebook, or an entry point: nothing is re-run
    spec = getattr(main, "__spec__", None)
    if os.path.basename(path) == "__main__.py" or (spec is not None and spec.name.endswith(".__main__")):
        return  # a package's __main__ (python -m pkg): spawn never re-runs it
    frame, outermost = inspect.currentframe(), None
    while frame is not None:  # the main module's outermost frame: where the call chain that builds us started
        if frame.f_globals.get("__name__") == "__main__":
            outermost = frame
        frame = frame.f_back
    if outermost is None or outermost.f_code.co_name != "<module>":
        return  # called from a function of the main module (main(), say) that is not run at import
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return
    if "__main__" not in source:
        raise LoaderUsageError(
            f"{path} builds a StreamLoader with worker processes from its top level without an "
            '`if __name__ == "__main__":` guard; spawned workers re-run the main script, so put the code that '
            'builds and iterates the loader under `if __name__ == "__main__":` (or use num_workers=0)'
        )


def check_picklable(source: StreamSource, items: Sequence[Any], spec: FillSpec) -> None:
    """Refuse, before any process starts, a source, transform or item that cannot travel to a spawned worker."""
    plugin = spec.plugin
    for what, obj, fix in (
        (f"source {plugin!r}", source, "module-level class holding only paths and options"),
        (f"transform {spec.transform!r}", spec.transform, "module-level class or function"),
    ):
        try:
            pickle.dumps(obj)
        except Exception as exc:
            raise TypeError(
                f"{what} cannot be pickled for worker processes ({exc}); make it a {fix}, or use num_workers=0"
            ) from exc
    for i, item in enumerate(items):
        try:
            pickle.dumps(item)
        except Exception as exc:
            raise TypeError(
                f"item {i} of source {plugin!r} ({short_repr(item)}) cannot be pickled: "
                f"{type(exc).__name__}: {exc}; worker processes receive every item, so items() must return "
                "plain data (paths, numbers, tuples), or use num_workers=0"
            ) from exc
