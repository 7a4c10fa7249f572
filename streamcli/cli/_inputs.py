"""The user's input before a source is built: a PATH or URL that exists and can be read (its plugin, when not
named, is inferred in ``_inference``).

Every problem raises ``UsageFailure`` (exit 2) naming the path and the fix.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from streamcli.cli._common import UsageFailure, unreadable
from streamcli.cli._mix import check_mix_input, is_mix
from streamcli.storage import urls


def check_readable(path: str | os.PathLike[str]) -> None:
    """Raise ``UsageFailure`` when this user may not read ``path`` (a file is opened, a folder listed).

    ``os.access`` would say yes to root even where the file system says no, so this asks the file system.
    """
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(path):
                pass
        elif stat.S_ISREG(mode):  # never open anything else: a FIFO would block here
            with open(path, "rb"):
                pass
    except PermissionError as exc:
        raise UsageFailure(unreadable(exc)) from None
    except OSError:
        return  # anything else (a FIFO, a vanished file) is the source's to report


def check_input(args: Sequence[str] | None) -> None:
    """The cheap part of ``resolve_source``, before anything slow: a given PATH exists and can be read."""
    args = list(args or [])
    if is_mix(args):
        return check_mix_input(args[1:], check_input)
    for a in args:
        url_argument(a)  # a URL that cannot be served: exit 2 before anything slow
    args = [a if urls.scheme(a) != "file" else str(urls.local_path(a)) for a in args]
    path = args[1] if len(args) == 2 else args[0] if len(args) == 1 and Path(args[0]).exists() else None
    if path is None or urls.is_remote(path):
        return
    if not Path(path).exists():
        if looks_like_path(path):  # a plugin may take another argument (camera 4)
            raise UsageFailure(f"{path!r} does not exist (the {args[0]} source needs an existing file or folder)")
        return
    check_readable(path)


def url_argument(arg: str) -> str:
    """A path as given, or a ``file://`` URL as its path; any other URL must be servable (else
    ``UnsupportedURLError``, exit 2, naming the URL and the package to install)."""
    if urls.is_remote(arg):
        urls.check(arg)
        return arg
    return str(urls.local_path(arg))


def looks_like_path(arg: str) -> bool:
    return os.sep in arg or arg.startswith(".") or Path(arg).suffix != ""
