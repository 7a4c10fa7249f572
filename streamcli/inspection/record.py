"""One batch as plain data: what ``streamcli inspect --batch K --json`` prints, row by row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.batch import Batch


def time_major(batch: Batch, name: str) -> np.ndarray:
    """A flag of the batch as a (T, B) numpy array, whatever its layout."""
    a = getattr(batch, name).numpy()
    return np.asarray(a if batch.layout == "TB" else a.swapaxes(0, 1))


def row_record(batch: Batch, b: int, name_of: Callable[[int], str]) -> dict[str, Any]:
    """Row ``b``: its stream (the first valid step's; -1 and no item on a padding row), positions and flags.

    A row that holds more than one stream in the batch (``boundary="pack"``) also lists each step's in
    ``streams``."""
    valid = time_major(batch, "valid")[:, b]
    stream = time_major(batch, "stream")[:, b]
    live = stream[valid]
    sid = int(live[0]) if live.size else -1
    out: dict[str, Any] = {
        "row": b,
        "stream": sid,
        "item": name_of(sid) if sid >= 0 else None,
        "positions": time_major(batch, "position")[:, b].tolist(),
        "is_first": time_major(batch, "is_first")[:, b].tolist(),
        "valid": valid.tolist(),
    }
    if np.unique(live).size > 1:
        out["streams"] = stream.tolist()
    return out


def batch_record(
    batch: Batch, k: int, name_of: Callable[[int], str], workers: Sequence[int | str] | None = None
) -> dict[str, Any]:
    """``{"batch": k, "epoch": E, "index": i, "rows": [...]}``; ``index`` is the batch's place in its epoch. With
    ``workers`` (``LoaderBatches.workers_of``), each row also says which producer made it (``"worker"``)."""
    rows = [row_record(batch, b, name_of) for b in range(batch.batch_size)]
    if workers is not None:
        for r, w in zip(rows, workers, strict=True):
            r["worker"] = w
    return {"batch": k, "epoch": batch.epoch, "index": batch.index, "rows": rows}
