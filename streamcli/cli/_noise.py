"""Keep Python warnings and native library messages (FFmpeg, OpenCV) off the user's terminal.

The library keeps using ``warnings``; the CLI shows each warning as one line in its own style (no source
line, no ``_common.py:248: UserWarning``). Native libraries write straight to file descriptor 2, which
would scribble over the live preview, so while it matters fd 2 points at a temporary file at the OS level
(worker processes started meanwhile inherit it). ``--debug`` shows everything: warnings as Python prints
them, and the native messages replayed at the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from types import TracebackType
from typing import IO, Any

from rich.console import Console
from rich.text import Text

_PY_WARNING = re.compile(r"^\S+:\d+: \w*Warning: (.*)$")  # how a worker's Python warning lands in fd 2


def warning_line(message: str) -> None:
    """One dim yellow line on stderr (newlines folded)."""
    msg = " ".join(str(message).split())
    Console(stderr=True, soft_wrap=True, highlight=False).print(Text("warning: ", "yellow") + Text(msg, "dim yellow"))


class CollectedWarnings:
    """Python warnings raised inside the block, and the library's log warnings (an item skipped under
    ``--on-error skip``), shown afterwards as one line each (repeats once)."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self.messages: list[str] = []
        self._ctx: Any = None
        self._handler: logging.Handler | None = None

    def __enter__(self) -> CollectedWarnings:
        if not self.debug:
            self._ctx = warnings.catch_warnings()
            self._ctx.__enter__()
            warnings.simplefilter("always")
            warnings.showwarning = self._show
            self._handler = _Collect(self)
            logging.getLogger("streamcli").addHandler(self._handler)
        return self

    def _show(self, message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        text = str(message)
        if text not in self.messages:
            self.messages.append(text)

    def __exit__(self, *exc: object) -> None:
        if self._handler is not None:
            logging.getLogger("streamcli").removeHandler(self._handler)
            self._handler = None
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None

    def report(self) -> None:
        for m in self.messages:
            warning_line(m)
        self.messages.clear()


class _Collect(logging.Handler):
    """The ``streamcli`` logger's warnings into a ``CollectedWarnings``, in place of Python's last-resort print
    to fd 2 (hidden during the live preview)."""

    def __init__(self, into: CollectedWarnings) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text not in self.into.messages:
            self.into.messages.append(text)


class NativeStderr:
    """Point fd 2 at a temporary file for the block; restore it on exit, whatever happened.

    ``report()`` afterwards shows what was caught: with ``debug`` all of it, else only the Python warnings
    that worker processes printed (one line each); FFmpeg's and OpenCV's chatter stays hidden.
    """

    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self._saved: int | None = None
        self._file: IO[bytes] | None = None
        self.text = ""
        self._read = 0  # bytes of the file parsed by ``warnings_so_far``
        self._partial = b""
        self._seen: list[str] = []

    def __enter__(self) -> NativeStderr:
        try:
            sys.stderr.flush()
            self._file = tempfile.TemporaryFile(prefix="streamcli-stderr-")
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError, AttributeError):  # no real fd 2 (an embedding host): nothing to do
            self._saved = None
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._saved is None:
            return
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        if self._file is not None:
            self._file.seek(0)
            self.text = self._file.read().decode(errors="replace")
            self._file.close()
            self._file = None

    def warnings_so_far(self) -> list[str]:
        """The Python warnings that processes (workers) wrote to fd 2 since the block began, while it runs: for
        a live view to show them as they happen. Reads only what was appended since the last call."""
        if self._file is None:
            return list(self._seen)
        try:
            data = os.pread(self._file.fileno(), 1 << 20, self._read)
        except OSError:
            return list(self._seen)
        self._read += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            m = _PY_WARNING.match(line.decode(errors="replace").strip())
            if m and m.group(1) not in self._seen:
                self._seen.append(m.group(1))
        return list(self._seen)

    def report(self) -> None:
        if not self.text:
            return
        if self.debug:
            sys.stderr.write(self.text)
            sys.stderr.flush()
            return
        seen: list[str] = []
        for line in self.text.splitlines():
            m = _PY_WARNING.match(line.strip())
            if m and m.group(1) not in seen:
                seen.append(m.group(1))
                warning_line(m.group(1))


@contextlib.contextmanager
def quiet(debug: bool, *, native: bool = True) -> Iterator[None]:
    """Warnings as one line each and native messages hidden (shown after the block); ``debug`` shows all.

    Used while a source is built: the video source probes files with OpenCV there.
    """
    caught = CollectedWarnings(debug)
    fd2 = NativeStderr(debug)
    try:
        with caught:
            if native and not debug:
                with fd2:
                    yield
            else:
                yield
    finally:
        fd2.report()
        caught.report()
