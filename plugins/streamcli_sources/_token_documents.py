"""A token file's documents: the runs of ids between end-of-text ids, found by one vectorised scan.

nanoGPT appends the end-of-text id after each document, llm.c puts it before each one; taking the runs *between*
them and skipping empty runs reads both the same way. Within a binidx pair the runs are cut inside the ``.idx``'s
documents (GPT-NeoX's ``--append-eod`` leaves an end-of-text id at each document's end).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SCAN_CHUNK = 1 << 24  # ids compared per vectorised pass: bounded memory for the mask, few Python rounds


def eot_positions(ids: np.ndarray, eot: int, tick: Callable[[int], None] | None = None) -> np.ndarray:
    """Where ``eot`` occurs in ``ids`` (int64, increasing), a chunk at a time; ``tick(n)`` after each chunk."""
    found = []
    for a in range(0, len(ids), SCAN_CHUNK):
        chunk = ids[a : a + SCAN_CHUNK]
        found.append(np.flatnonzero(chunk == eot) + a)
        if tick is not None:
            tick(len(chunk))
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)


def split_documents(
    starts: np.ndarray, lens: np.ndarray, eots: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """The runs of ids within the ranges ``(starts, lens)`` that hold no position of ``eots``, in file order, empty
    runs left out. The ranges must not overlap (``where`` names the file when they do)."""
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], (starts + lens)[order]
    if len(starts) > 1 and (starts[1:] < ends[:-1]).any():
        raise ValueError(f"{where}: its documents overlap, so they cannot also be cut at end-of-text ids")
    # Every edge of a range and of an end-of-text id cuts; of the pieces, keep those inside a range but no eot.
    cuts = np.unique(np.concatenate([starts, ends, eots, eots + 1]))
    a, b = cuts[:-1], cuts[1:]
    k = np.searchsorted(starts, a, side="right") - 1
    inside = (k >= 0) & (a < ends[np.maximum(k, 0)]) if len(starts) else np.zeros(len(a), bool)
    j = np.searchsorted(eots, a)
    is_eot = (j < len(eots)) & (eots[np.minimum(j, max(len(eots) - 1, 0))] == a) if len(eots) else False
    keep = inside & ~is_eot & (b > a)
    return a[keep].astype(np.int64), (b - a)[keep].astype(np.int64)
