"""A script's main guard, checked before any worker starts: spawned workers re-run the main module."""

from __future__ import annotations

import inspect
import os
import sys

from streamcli.errors import LoaderUsageError


def check_main_guard() -> None:
    """Refuse, before any worker starts, a loader built at the top level of a script without a main guard.

    Spawned workers import the main module again; unguarded, the script would build a loader inside every
    worker, which fails there with a message about bootstrapping that blames nobody, or leaves the parent blocked
    writing the worker's start-up data. That includes a loader built in a function the script calls at its top
    level.
    """

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
