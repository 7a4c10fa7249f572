"""Constant members of format 3: a field that holds the same value on every real step of a shard, and zeros on its
padding, is stored once, as one step's value (shape ``field.shape``) instead of ``(K, T, B, *field.shape)``.

The ``text`` source's ``nbytes`` at ``width=1`` is the case that asks for it: a byte count that is 1 on every real
step costs as much as the text itself when stored per step. The test is on the values' bytes, not on ``==``, so a
``-0.0`` or a NaN payload is never folded into another value, and rebuilding a member gives back its exact bytes:
the value on each real step, zero bytes on padding (which is what the loader puts there). Whether a member is folded
depends on the shard's values only, so a resumed or a Ray export writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

LEAD = 3
"""The dimensions a per-step member has before its field's: (K, T, B) or (K, B, T)."""


def step_valid(m: Mapping[str, Any], runs: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """The ``valid`` flag of each step of a shard of ``k`` batches, ``(k, T, B)`` (``(k, B, T)`` for layout BT), from
    its ``run.length`` and ``run.bits`` (the runs cover the steps in order: batch, row, time)."""
    T, B = int(m["time_steps"]), int(m["batch_size"])
    length = np.asarray(runs["run.length"]).astype(np.int64)
    valid = np.repeat((np.asarray(runs["run.bits"]).astype(np.int64) & 4) != 0, length).reshape(k, B, T)
    return valid if m["layout"] == "BT" else valid.transpose(0, 2, 1)


def folded(a: np.ndarray, valid: np.ndarray) -> np.ndarray | None:
    """One step's value if every real step of ``a`` (``(*valid.shape, *field)``) holds it byte for byte and every
    padding step is zero bytes; else None (the member is stored per step)."""
    lead = valid.ndim
    if a.size == 0 or a.ndim < lead or a.shape[:lead] != valid.shape:
        return None
    field = a.shape[lead:]
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(valid.size, -1)
    flat = valid.reshape(-1)
    real = np.flatnonzero(flat)
    if len(real) == 0:
        return np.zeros(field, a.dtype) if not raw.any() else None
    value = raw[real[0]]
    if not (raw[flat] == value).all() or raw[~flat].any():
        return None
    return np.array(a.reshape(valid.size, *field)[real[0]])


def is_folded(a: np.ndarray, field_ndim: int) -> bool:
    """Whether a stored data member is a folded one: it has its field's dimensions only."""
    return a.ndim == field_ndim


def unfolded(value: np.ndarray, valid: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The per-step member that ``folded`` made ``value`` of: ``value`` on each real step, zeros on padding."""
    out = np.zeros((*valid.shape, *value.shape), dtype)
    out[valid] = value.astype(dtype)
    return out
