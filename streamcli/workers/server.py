"""Preloaded by the fork server that ``workers.start`` starts with ``ENV`` set, once for all the workers forked
from it: import the caller's main module as a spawned child would (CPython 3.11's server is asked to but reads the
wrong key, so each worker imported it, a training script's ``import torch`` included), and remove the server's
``pymp-*`` folder in ``$TMPDIR`` when it exits (a loader killed by ``SIGKILL`` cannot).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
from multiprocessing import process, spawn
from typing import Any

ENV = "STREAMCLI_FORKSERVER_MAIN"


def import_main(data: dict[str, Any]) -> bool:
    """Import the main module ``data`` (``spawn.get_preparation_data``'s) names. False where there is none, or
    where importing it failed: the workers then import it themselves and report its error as theirs."""
    if not ({"init_main_from_name", "init_main_from_path"} & data.keys()):
        return False
    current: object = process.current_process()
    current._inheriting = True  # type: ignore[attr-defined]  # a process started at import time would fail
    try:
        spawn.prepare(data)  # what a spawned child does: its path, argv and folder, then the main module
    except BaseException:  # anything the module raises (SystemExit too) stays the workers' to report
        return False
    finally:
        del current._inheriting  # type: ignore[attr-defined]
    return True


_raw = os.environ.pop(ENV, None)
if _raw is not None:
    _data = json.loads(_raw)
    _folder = _data.pop("tempdir", "")
    if os.path.basename(_folder).startswith("pymp-"):
        atexit.register(shutil.rmtree, _folder, True)
    import_main(_data)
