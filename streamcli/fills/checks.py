"""The plugin contract, checked: the declared fields, and each step's or block's fields as a producer reads them
(the usual step is checked by the reader where it copies it). A mismatch raises ``StepSpecError`` naming the
plugin, the item, the step and the field, with the fix (``where()`` builds that name only on error)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.batch import FLAGS
from streamcli.errors import StepSpecError
from streamcli.source import Field

Spec = Sequence[tuple[str, tuple[int, ...], np.dtype[Any]]]  # (name, shape, dtype) per field, in field order


def step_field(
    step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any], where: Callable[[], str]
) -> np.ndarray:
    """Field ``name`` of one step as an array of ``shape`` and ``dtype`` (scalars and lists converted), or raise
    ``StepSpecError``; ``where()`` says "plugin ... item ... step N"."""
    a = _array(step, name, where, "step", "yield a dict with every declared field")
    if a.shape != shape or a.dtype != dtype:
        raise StepSpecError(
            f"{where()}: field {name!r} is {a.dtype.name}{list(a.shape)} but the source declared "
            f"{dtype.name}{list(shape)}; make the step match fields() (e.g. resize or .astype)"
        )
    return a


def block_arrays(block: Any, spec: Spec, where: Callable[[], str]) -> list[np.ndarray]:
    """A block's arrays in field order, each ``(n, *shape)`` with the same ``n >= 1``, or raise ``StepSpecError``
    naming the field that is missing, mis-shaped or of another step count than the rest (``where()`` says
    "plugin ... item ... block at step N")."""
    out: list[np.ndarray] = []
    try:  # the usual block: exact arrays, checked in a few comparisons each
        for name, shape, dtype in spec:
            a = block[name]
            if type(a) is not np.ndarray and isinstance(a, np.ndarray):
                a = a.view(np.ndarray)  # a memmap's slice: slicing it again makes more memmaps, slower to make
            n = len(out[0]) if out else len(a)
            if type(a) is not np.ndarray or a.shape[1:] != shape or a.dtype != dtype or not n or len(a) != n:
                break
            out.append(a)
        else:
            return out
    except (KeyError, TypeError, IndexError):
        pass
    out = []
    for name, shape, dtype in spec:  # the full check: converts array-likes, and names what is wrong
        fix = "with block_steps=True yield a dict of (n, *shape) arrays, one per declared field"
        a = _array(block, name, where, "block", fix)
        if a.ndim != len(shape) + 1 or a.shape[1:] != shape or a.dtype != dtype or len(a) < 1:
            raise StepSpecError(
                f"{where()}: field {name!r} is {a.dtype.name}{list(a.shape)} but a block of n >= 1 steps must be "
                f"{dtype.name}[n, {', '.join(map(str, shape))}]; make the block match fields()"
            )
        if out and len(a) != len(out[0]):
            raise StepSpecError(
                f"{where()}: fields of one block must have the same n steps; {name!r} has {len(a)}, another has "
                f"{len(out[0])}"
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
    """The declared fields, when a loader is made: at least one, unique names, none a batch flag's."""
    if not fields:
        raise ValueError("the source declares no fields; fields() must return at least one Field")
    names = [f.name for f in fields]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"the source declares field(s) {sorted(dup)} more than once; give each a unique name")
    bad = RESERVED.intersection(names)
    if bad:
        raise ValueError(f"field name(s) {sorted(bad)} clash with batch flags; rename them in fields()")
