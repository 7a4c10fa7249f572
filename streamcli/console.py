"""The ``streamcli`` console script's entry point.

It imports the command line (Typer, Rich, every command's module: a good part of a second) inside ``main``, so that a
Ctrl-C during those imports ends with exit 130 and no traceback, as one during the command does (the console script
itself imports only this module, which imports nothing).
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from streamcli.cli import main as run
    except KeyboardInterrupt:
        sys.exit(130)
    run()
