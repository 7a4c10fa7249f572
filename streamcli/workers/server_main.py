"""Imported by the fork server as it starts: the caller's main module, once, for every worker forked from it.

CPython 3.11's fork server is asked to preload ``__main__`` but is handed the main module's path under a key that
it does not read (``main_path``, where ``spawn.get_preparation_data`` says ``init_main_from_path``), so every worker
imported the main module itself: a training script's
``import torch`` once per worker and per loader. ``workers.start`` puts what the server needs (the parent's
``sys.path``, ``sys.argv``, folder and main module, as ``multiprocessing.spawn`` prepares a spawned child) in an
environment variable before the server starts; importing this module does what the server should have done (and
nothing where a Python's server did import it: the main module is then in place already).
A worker forked from the server then finds its main module in place and does not import it again, so every
worker runs the code the server read once, not a script edited since.
"""

from __future__ import annotations

import json
import os
from multiprocessing import process, spawn

ENV = "STREAMCLI_FORKSERVER_MAIN"


def import_main() -> bool:
    """Import the main module that ``ENV`` names, as a spawned child would (``__mp_main__``, guarded code
    skipped). False where there is none, or where importing it failed: the workers then import it themselves,
    as before, and report its error as theirs."""
    raw = os.environ.pop(ENV, None)
    if not raw:
        return False
    try:
        data = json.loads(raw)
        if not ({"init_main_from_name", "init_main_from_path"} & data.keys()):
            return False
        current: object = process.current_process()
        current._inheriting = True  # type: ignore[attr-defined]  # a process started at import time would fail
        try:
            spawn.prepare(data)  # what a spawned child does: its path, argv and folder, then the main module
        finally:
            del current._inheriting  # type: ignore[attr-defined]
    except BaseException:  # anything the module raises (SystemExit too) stays the workers' to report
        return False
    return True


import_main()
