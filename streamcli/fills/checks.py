"""The plugin contract, checked: the declared fields when a loader is made, and as a producer reads, each step's
(or block's) fields against the declared ones.

The usual step is cheap to check: an exact ``ndarray`` of the declared shape and dtype, tested in a few
comparisons where it is copied (``write._copy``, the hot path). What is left lands here: array-likes and scalars
are converted, and anything that does not match raises ``StepSpecError`` naming the plugin, the item, the step
and the field, with the fix. ``where`` builds that name only on error: an item's name can cost more than the
check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.batch import FLAGS
from streamcli.errors import StepSpecError
from streamcli.source import Field

Spec = Sequence[tuple[str, tuple[int, ...], np.dtype[Any]]]  # (name, shape, dtype) per field (``Producer.spec``)


def step_field(step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any], where: Callable[[], str]) -> Any:
    """Field ``name`` of one step as an array of ``shape`` and ``dtype`` (scalars and lists converted), or raise
    ``StepSpecError``; ``where()`` says "plugin ... item ... step N"."""
    a = _array(step, name, where, "step", "yield a dict with every declared field")
    if a.shape != shape or a.dtype != dtype:
        raise StepSpecError(
            f"{where()}: field {name!r} is {a.dtype.name}{list(a.shape)} but the source declared "
            f"{dtype.name}{list(shape)}; make the step match fields() (e.g. resize or .astype)"
        )
    return a


def block_arrays(block: Any, spec: Spec, fields: Sequence[Field], where: Callable[[], str]) -> list[np.ndarray]:
    """A block's arrays in field order, each ``(n, *shape)`` with the same ``n >= 1``; raise ``StepSpecError``
    if a field is missing, mis-shaped or of another step count than the rest. ``where()`` says "plugin ... item
    ... block at step N"."""
    try:  # the usual block: exact arrays, checked in a few comparisons each
        if len(spec) == 1:  # the common source of one field: no loops
            name, shape, dtype = spec[0]
            a = block[name]
            if type(a) is not np.ndarray and isinstance(a, np.ndarray):
                a = a.view(np.ndarray)  # a memmap's slice: slicing it again makes more memmaps, slower to make
            if type(a) is np.ndarray and a.shape[1:] == shape and (a.dtype is dtype or a.dtype == dtype) and len(a):
                return [a]
        else:
            out = [a.view(np.ndarray) if isinstance(a, np.ndarray) else a for a in (block[name] for name, _, _ in spec)]
            n = len(out[0])
            for a, (_, shape, dtype) in zip(out, spec, strict=True):
                if (
                    type(a) is not np.ndarray
                    or a.shape[1:] != shape
                    or (a.dtype is not dtype and a.dtype != dtype)
                    or len(a) != n
                    or not n
                ):
                    break
            else:
                return out
    except (KeyError, TypeError, IndexError):
        pass
    return _block_slowly(block, fields, where)


def _block_slowly(block: Any, fields: Sequence[Field], where: Callable[[], str]) -> list[np.ndarray]:
    """The full check of a block: converts array-likes, and names the field of what is wrong."""
    out: list[np.ndarray] = []
    for f in fields:
        a = _array(
            block,
            f.name,
            where,
            "block",
            "with block_steps=True yield a dict of (n, *shape) arrays, one per declared field",
        )
        if a.ndim != len(f.shape) + 1 or a.shape[1:] != f.shape or a.dtype != f.np_dtype or len(a) < 1:
            raise StepSpecError(
                f"{where()}: field {f.name!r} is {a.dtype.name}{list(a.shape)} but a block of n >= 1 steps must be "
                f"{f.np_dtype.name}[n, {', '.join(map(str, f.shape))}]; make the block match fields()"
            )
        if out and len(a) != len(out[0]):
            raise StepSpecError(
                f"{where()}: fields of one block must have the same n steps; {f.name!r} has "
                f"{len(a)}, another has {len(out[0])}"
            )
        out.append(a)
    return out


def _array(got: Any, name: str, where: Callable[[], str], what: str, fix: str) -> np.ndarray:
    """Field ``name`` of a step or block (``what``) as an array (scalars and lists converted), or raise naming it."""
    try:
        a = got[name]
    except (KeyError, TypeError, IndexError):
        raise StepSpecError(f"{where()}: the {what} has no field {name!r} (got {type(got).__name__}); {fix}") from None
    return a if type(a) is np.ndarray else np.asarray(a)


RESERVED = {*FLAGS, "reset", "claims", "cursor", "writer"}  # (slot entries of their own)


def short_repr(value: object, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def check_fields(fields: tuple[Field, ...]) -> None:
    if not fields:
        raise ValueError("the source declares no fields; fields() must return at least one Field")
    names = [f.name for f in fields]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"the source declares field(s) {sorted(dup)} more than once; give each a unique name")
    bad = RESERVED.intersection(names)
    if bad:
        raise ValueError(f"field name(s) {sorted(bad)} clash with batch flags; rename them in fields()")
