"""The ``streamcli`` command: a thin Typer app over the library, one module per command.

Nothing here imports torch at module level, so ``streamcli --help`` and ``streamcli plugins`` stay fast.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import weakref
from types import FrameType
from typing import Annotated

import typer

from streamcli.cli import (
    cmd_bench,
    cmd_events,
    cmd_export,
    cmd_index,
    cmd_inspect,
    cmd_plugins,
    cmd_preview,
    cmd_replay,
    cmd_samples,
    cmd_verify,
)
from streamcli.cli._common import STATE, StreamcliGroup

app = typer.Typer(
    name="streamcli",
    cls=StreamcliGroup,
    help="Turn many streams (videos, text, audio) into temporally coherent (T, B, ...) batches.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from streamcli import __version__

        typer.echo(f"streamcli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full tracebacks, warnings and native library messages.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Turn many streams (videos, text, audio) into temporally coherent (T, B, ...) batches."""
    STATE.debug = STATE.debug or debug
    if STATE.debug:  # the video source keeps FFmpeg's and OpenCV's own messages off unless this is set
        os.environ["STREAMCLI_NATIVE_LOG"] = "1"


for _module in (cmd_plugins, cmd_preview, cmd_bench, cmd_export, cmd_verify, cmd_events, cmd_replay, cmd_samples):
    _module.register(app)
cmd_inspect.register(app)
cmd_index.register(app)


def main() -> None:
    """Console-script entry point."""
    # A closed terminal (SIGHUP) or `kill` (SIGTERM) would end the process without running any cleanup; turn
    # them into the same unwinding as Ctrl-C so workers stop and shared memory is freed.
    for sig in (*_STOP_SIGNALS, signal.SIGINT):
        signal.signal(sig, _interrupt)
    try:
        app()
    except KeyboardInterrupt:  # one that lands outside the command's own handling (start-up, exit)
        sys.exit(130)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_FINALIZER_CODE = weakref.finalize.__call__.__code__


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if _in_finalizer(frame):
        # Python prints and drops an exception raised inside a finalizer or __del__ (a user's, or a library's):
        # the signal would be lost. Deliver it again once the finalizer has returned.
        again = threading.Timer(0.01, _thread.interrupt_main, args=(signum,))
        again.daemon = True  # a process that is exiting anyway need not wait for it
        again.start()
        return
    if signum != signal.SIGINT:  # one is enough: let the cleanup that follows run to its end
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _in_finalizer(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is _FINALIZER_CODE or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


__all__ = ["app", "main"]
