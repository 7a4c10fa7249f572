"""Warnings that point at the user's line, not inside the library.

A warning's ``stacklevel`` counted by hand breaks as soon as a call path changes, and a built-in source's
``warnings.warn(..., stacklevel=3)`` lands on whichever line of the loader called it (``declared.py:50``). Here
the user's line is found instead: the first frame outside streamcli and its built-in sources.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
_OURS = ("streamcli", "streamcli_sources")  # the library and its built-in sources


def _ours(frame: FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).split(".")[0] in _OURS


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller of this function name the user's line: the
    first frame outside streamcli (and its built-in sources) on the way out."""
    frame = sys._getframe(1)
    level = 1
    while _ours(frame) and frame.f_back is not None:
        frame, level = frame.f_back, level + 1
    return level


def at_user_line(fn: Callable[[], T]) -> T:
    """``fn()`` (a call into a source, say), with the warnings it raises from the library's own files shown at the
    user's line; a warning that already points elsewhere (a user's plugin) is shown where it points. If ``fn``
    raises, its error wins over a warning that the filters turn into one."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # every one is recorded; the user's filters decide when it is re-raised
            result = fn()
    except BaseException:
        with contextlib.suppress(Warning):
            _show(caught)
        raise
    _show(caught)
    return result


def _show(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        if _in_library(w.filename):
            warnings.warn(w.message, w.category, stacklevel=user_stacklevel())
        else:
            registry = _registry_of(w.filename)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry, source=w.source)


def _in_library(filename: str) -> bool:
    for name in _OURS:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(filename).startswith(os.path.dirname(os.path.abspath(path)) + os.sep):
            return True
    return False


def _registry_of(filename: str) -> dict[Any, Any] | None:
    """The warnings registry of the module in ``filename`` (so a "default" filter shows its warning once), if any."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == filename:
            return module.__dict__.setdefault("__warningregistry__", {})  # type: ignore[no-any-return]
    return None
