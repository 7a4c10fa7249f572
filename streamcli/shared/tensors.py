"""The loader's contact with torch: a signal-safe import, pinned memory, and the slot chores around a batch."""

from __future__ import annotations

import itertools
import sys
import warnings
from typing import Any

import numpy as np

from streamcli import signals
from streamcli.caller import user_stacklevel
from streamcli.source import Field

_pin_warned = False


def import_torch() -> Any:
    """Import torch with Ctrl-C, SIGTERM and SIGHUP held back until it is done: a KeyboardInterrupt inside
    torch's native initialisation can abort the interpreter. Importing streamcli never imports torch."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    with signals.held():
        # numpy imports its random module on first use, and a Cython module's start-up there swallows any
        # exception (a bare ``except``), so a Ctrl-C landing in it mid-run would be lost: imported here, at once.
        import numpy.random  # noqa: F401
        import torch
    return torch


def pin_available(torch: Any) -> bool:
    """Whether pinning is possible; warns once per process when it is asked for but is not."""
    global _pin_warned
    if torch.cuda.is_available():
        return True
    if not _pin_warned:
        _pin_warned = True
        message = "pin_memory=True but CUDA is not available; batches stay in pageable memory"
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())
    return False


def pad_slot(v: dict[str, np.ndarray], fields: tuple[Field, ...]) -> None:
    """Make a filled slot all padding (a fixed-length epoch's batches after its "drop" end)."""
    for f in fields:
        v[f.name][...] = 0
    for name, value in (("is_first", False), ("valid", False), ("replayed", False), ("stream", -1), ("position", -1)):
        v[name][...] = value


def split_rows(batch_size: int, producers: int) -> list[tuple[int, int]]:
    """Contiguous row blocks, sizes differing by at most one."""
    edges = np.linspace(0, batch_size, producers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]
