"""Filling a batch from random-access sources (``window(item)``: each field's steps as an array-like, read by
``a[pos:pos + n]``): one slice copy per row and field, straight from the plan, in any producer. Each item's window
is opened and checked once per process, and kept while used."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streamcli.errors import StepSpecError
from streamcli.fills.flags import Views, pad
from streamcli.fills.spec import SOURCE_ERRORS, Faults
from streamcli.fills.transformed import Transformer
from streamcli.scheduled.schedule import BatchRuns, Run
from streamcli.shared.control import WINDOWING
from streamcli.source import Field, StreamSource, call_window

_KEEP = 4096  # windows kept open per process (the oldest opened go first)
Const = tuple[bytes, np.ndarray] | None  # a field whose every step is the same value (a stride-0 array): its value
Window = tuple[list[Any], int, list[Const] | None]  # arrays by field, steps (-1: failed), constants (None: none)


class Windows:
    """Each item's window in this process, opened and checked once. Under ``on_error="skip"`` a failed window is kept
    with its error (``errors``), reported by the run that starts its stream."""

    def __init__(
        self,
        source: StreamSource,
        fields: Sequence[Field],
        faults: Faults,
        mark: np.ndarray,
        tf: Transformer | None = None,
    ) -> None:
        self.source, self.fields, self.faults, self.mark = source, tuple(fields), faults, mark
        self.tf = tf  # the loader's transform, run on each run's slice; ``fields`` are the source's own
        self.open: dict[int, Window] = {}  # the hot loop looks windows up here directly
        self.fills: list[Const] = [None] * len(self.fields)  # per field, the constant value a batch starts from
        self.to_copy: dict[int, list[int]] = {}  # per item with constant fields, the fields its rows copy
        self.errors: dict[int, BaseException] = {}
        # Per field, the (dtype, step shape) of arrays already found to fit it: a window like them costs no check.
        self.fits: list[set[tuple[Any, ...]]] = [set() for _ in self.fields]

    def get(self, item: int, pos: int) -> Window:
        got = self.open.get(item)
        if got is not None:
            return got
        self.mark[0], self.mark[1], self.mark[2] = item, pos, WINDOWING
        self.faults.check_data(item)
        try:
            mapping = call_window(self.source, self.faults.items[item])
            if mapping is None:
                raise StepSpecError(
                    f"{self.faults.where(item, pos, 'window at step')}: window() returned None; a source with a "
                    "window() member must return one mapping per item"
                )
            arrays: list[Any] = []
            for i, f in enumerate(self.fields):
                arrays.append(self._checked(mapping, f, i, item, len(arrays[0]) if i else -1))
            n = len(arrays[0]) if arrays else 0
            consts: list[Const] = [_constant(a) for a in arrays]
            got = (arrays, n, consts if any(consts) else None)
        except SOURCE_ERRORS as exc:
            if isinstance(exc, StepSpecError) or self.faults.on_error != "skip":
                self.faults.fail(item, pos, exc, "opening")
            self.errors[item] = exc
            got = ([], -1, None)
        self.open[item] = got
        if len(self.open) > _KEEP:
            oldest = next(iter(self.open))
            del self.open[oldest]
            self.to_copy.pop(oldest, None)
        return got

    def _checked(self, mapping: Any, f: Field, i: int, item: int, n: int) -> Any:
        """Field ``f`` (the ``i``-th) of a window, checked against its declaration and ``n`` steps (-1: the first)."""
        try:
            a = mapping[f.name]
        except (KeyError, TypeError, IndexError):
            raise StepSpecError(
                f"{self.faults.where(item, 0, 'window')}: the window has no field {f.name!r}; window() must map "
                "every declared field to an array of steps"
            ) from None
        if isinstance(a, np.ndarray):
            a = probe = np.asarray(a)  # a memmap's slices are memmaps: slower to make than plain views
        else:
            probe = np.asarray(a[0:1])
        kind = (probe.dtype, probe.shape[1:])
        fits = self.fits[i]
        if kind not in fits:
            if kind[1] != f.shape or not _casts(probe.dtype, f.np_dtype):
                self._refuse(f, probe, len(a), item)
            fits.add(kind)
        if n >= 0 and len(a) != n:
            self._refuse(f, probe, len(a), item)
        return a if self.tf is None or probe.dtype == f.np_dtype else _Cast(a, f.np_dtype)

    def _refuse(self, f: Field, probe: np.ndarray, n: int, item: int) -> None:
        raise StepSpecError(
            f"{self.faults.where(item, 0, 'window')}: field {f.name!r} is {probe.dtype.name}{['n', *probe.shape[1:]]} "
            f"of {n} steps but the source declared {f.np_dtype.name}{['n', *f.shape]} (every field of one window has "
            "the same number of steps); make window() match fields()"
        )


def _casts(have: np.dtype[Any], want: np.dtype[Any]) -> bool:
    """A window may hold narrower integers than its field (uint16 token ids for int64): the slice copy casts them."""
    return have == want or (have.kind in "iu" and want.kind in "iu" and np.can_cast(have, want, "safe"))


class _Cast:
    """A window's array read as its field's dtype, for the transform (which is given the declared dtypes)."""

    def __init__(self, a: Any, dtype: np.dtype[Any]) -> None:
        self.a, self.dtype = a, dtype

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, s: slice) -> np.ndarray:
        return np.asarray(self.a[s], self.dtype)


def fill(v: Views, plan: BatchRuns, windows: Windows, faults: Faults, first: int) -> set[int]:
    """Batch ``plan.k``'s data (every row; ``first``: the batch the epoch started or resumed at). Returns the rows
    that end the batch holding a stream whose steps ran out before its promise (their cursor says ``SHORT``)."""
    T, data, tf = len(v.valid), v.data, windows.tf
    short: set[int] = set()
    get, opened = windows.get, windows.open
    cross: list[Run] = []  # whole rows whose window ends inside the batch: runs, checked as such
    fills, to_copy = windows.fills, windows.to_copy
    learnt: dict[int, tuple[bytes, np.ndarray]] = {}  # constant values seen: batches after this one start from them
    for dst, c in zip(data, fills if tf is None else [None] * len(data), strict=True):  # (with a transform: none)
        if c is not None:
            dst[...] = c[1]  # rows whose window repeats this value need no copy
            for row, t0, t1 in plan.pads:  # padding stays zeros (``write_flags`` wrote it before)
                dst[t0:t1, row] = 0
    for i, (b, item, p, stop) in enumerate(
        zip(plan.whole.tolist(), plan.item.tolist(), plan.pos.tolist(), plan.stop.tolist(), strict=True)
    ):
        arrays, n, consts = opened.get(item) or get(item, p)
        if n < p + T:
            cross.append(
                (b, 0, T, item, p, bool(plan.replay[i]), False, stop, int(plan.expect[i]), int(plan.seg_end[i]))
            )
            continue
        if tf is not None:
            for dst, a in zip(data, tf.apply([a[p : p + T] for a in arrays], item, p), strict=True):
                dst[:, b] = a
        elif consts is None:  # the hot path: one slice copy per field
            for dst, a in zip(data, arrays, strict=True):
                dst[:, b] = a[p : p + T]
        else:  # copy only the fields whose value is not the batch's constant
            need = to_copy.get(item)
            if need is None:
                need = to_copy[item] = _fields_to_copy(consts, fills, learnt)
            for f in need:
                data[f][:, b] = arrays[f][p : p + T]
        if n == p + T < stop:  # the steps end with the batch, the promise goes on
            faults.mismatch(item, n, int(plan.expect[i]), f"ended after {n} steps")
            short.add(b)
    for f, c in learnt.items():
        fills[f] = c
    if learnt:
        to_copy.clear()  # the batch's constants changed
    first_batch = plan.k == first
    for b, t0, n, item, p, _, fresh, stop, expect, seg_end in plan.runs + cross if cross else plan.runs:
        arrays, have, _ = opened.get(item) or get(item, p)
        m = max(0, min(n, have - p))
        if m:
            got = [a[p : p + m] for a in arrays]
            for dst, a in zip(data, got if tf is None else tf.apply(got, item, p), strict=True):
                dst[t0 : t0 + m, b] = a
        if m < n:
            pad(v, b, t0 + m, t0 + n)
        if have < 0:
            if fresh or (first_batch and t0 == 0):
                faults.fail(item, p, windows.errors[item], "opening")  # reported as skipped
        elif fresh and have <= p:
            faults.mismatch(item, p, expect, f"ended after {p} steps")
        elif p < have < p + n or have == p + n < stop:
            faults.mismatch(item, have, expect, f"ended after {have} steps")
        elif p + n == stop == expect != seg_end and have > expect:
            faults.mismatch(item, stop, expect, "goes on past them")
        if t0 + n == T and p + n < stop and have <= p + n:
            short.add(b)
    return short


def _fields_to_copy(consts: list[Const], fills: list[Const], learnt: dict[int, tuple[bytes, np.ndarray]]) -> list[int]:
    """The fields a row of this window copies: all but those whose constant is the batch's. A constant the batch
    does not start from yet is learnt: batches after this one start from it."""
    need = []
    for f, (c, fill) in enumerate(zip(consts, fills, strict=True)):
        if c is None or fill is None or c[0] != fill[0]:
            need.append(f)
            if c is not None and fill is None:
                learnt.setdefault(f, c)
    return need


def _constant(a: Any) -> Const:
    """The value of a field whose window repeats one step (a stride-0 array, e.g. ``np.broadcast_to``)."""
    if isinstance(a, np.ndarray) and a.ndim and a.strides[0] == 0 and len(a):
        value = np.array(a[0])
        return value.tobytes(), value
    return None
