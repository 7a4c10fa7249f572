"""The fork server's folder in ``$TMPDIR`` (multiprocessing's ``pymp-*``, which holds its socket), removed by the
server itself once the loader's process is gone.

The loader's process removes the folder when it exits. Killed (``SIGKILL``), it cannot: the server then sees its
pipe from the loader close and exits, and its workers die with it (their parent-death signal), so a worker's
watchdog may not get to it either. This module is preloaded by the server (``workers.start``): at import it finds
its own listening socket and registers the folder's removal for the server's exit. That exit is the server's
``SystemExit`` when every loader process has gone, the one case in which nobody else will remove it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import sys


def served_folder() -> str | None:
    """The ``pymp-*`` folder of the listening Unix socket this process holds (a fork server's), or None."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                with socket.socket(fileno=os.dup(int(name))) as s:
                    address = s.getsockname() if s.family == socket.AF_UNIX else None
                if isinstance(address, str) and os.path.basename(os.path.dirname(address)).startswith("pymp-"):
                    return os.path.dirname(address)
    return None


# Only a process that listens on a socket in its pymp folder registers (the server; a client's socket is unbound):
# the loader's own process removes its folder at exit itself, and a second removal of a folder gone is nothing.
if "multiprocessing.forkserver" in sys.modules:
    _folder = served_folder()
    if _folder is not None:
        atexit.register(shutil.rmtree, _folder, True)
