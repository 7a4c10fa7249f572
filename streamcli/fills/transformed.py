"""A producer's transform (``StreamLoader(transform=...)``), run on each block of steps as it is read: checked
against the source's fields, handed to the transform with a ``Context`` (stream, first position, epoch, seed), and
what comes back checked against the loader's fields. Iterator sources are wrapped where they open (``wrap``; a step
is a block of one); random-access sources transform the slice a run reads (``apply``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from streamcli.errors import TransformError
from streamcli.fills.spec import FillSpec, block_arrays, step_field
from streamcli.shared.control import Control
from streamcli.source import Field, close_stream
from streamcli.transforms import Context, stream_seed


class Transformer:
    """The transform of one producer: ``fill_spec.transform``, from its ``source_fields`` to its ``fields``."""

    def __init__(self, fill_spec: FillSpec, control: Control, name: Callable[[int], str]) -> None:
        assert fill_spec.source_fields is not None
        self.transform, self.plugin, self.name = fill_spec.transform, fill_spec.plugin, name
        self.control = control
        self.seed_of = functools.lru_cache(4096)(functools.partial(stream_seed, fill_spec.config.seed))
        self.named = getattr(self.transform, "__name__", type(self.transform).__name__)
        self.raw = [(f.name, f.shape, f.np_dtype) for f in fill_spec.source_fields]
        self.out = fill_spec.fields

    @classmethod
    def of(cls, fill_spec: FillSpec, control: Control, name: Callable[[int], str]) -> Transformer | None:
        return None if fill_spec.transform is None else cls(fill_spec, control, name)

    def apply(self, arrays: Sequence[np.ndarray], item: int, pos: int) -> list[np.ndarray]:
        """The transformed block of ``item`` from step ``pos``: ``arrays`` in source field order, the result in
        the loader's field order; raises ``TransformError`` if the transform fails or breaks its fields."""
        n = len(arrays[0])
        block = {name: _read_only(a) for (name, _, _), a in zip(self.raw, arrays, strict=True)}
        epoch = self.control.epoch
        named, seed = self.named, self.seed_of(epoch, item)
        try:
            got = self.transform(block, Context(stream=item, position=pos, epoch=epoch, seed=seed))
        except Exception as exc:
            raise TransformError(
                f"transform {named} failed on {self._at(item, pos)}: {type(exc).__name__}: {exc}"
            ) from exc
        out: list[np.ndarray] = []
        for f in self.out:
            try:
                a = got[f.name]
            except (KeyError, TypeError, IndexError):
                raise TransformError(
                    f"transform {named} returned no field {f.name!r} on {self._at(item, pos)}; return every field "
                    "of the block"
                ) from None
            a = np.asarray(a)
            if a.shape != (n, *f.shape) or a.dtype != f.np_dtype:
                raise TransformError(
                    f"transform {named} returned field {f.name!r} as {a.dtype.name}{list(a.shape)} on "
                    f"{self._at(item, pos)}, but the batch expects {f.np_dtype.name}{[n, *f.shape]} (the transform's "
                    "fields(), else the source's); keep the block's step count and declare a changed shape or dtype "
                    "with a fields(fields) member"
                )
            out.append(a)
        return out

    def wrap(self, it: Iterator[Any], item: int, start: int, blocks: bool) -> Iterator[Any]:
        """The source's iterator of ``item`` from ``start``, transformed: blocks stay blocks, steps stay steps."""
        names, pos = [f.name for f in self.out], start
        try:
            for got in it:
                where = functools.partial(self._at, item, pos, "block at step" if blocks else "step")
                if blocks:
                    arrays = block_arrays(got, self.raw, where)
                else:
                    arrays = [step_field(got, name, shape, dtype, where)[None] for name, shape, dtype in self.raw]
                out = self.apply(arrays, item, pos)
                pos += len(out[0])
                yield (
                    dict(zip(names, out, strict=True)) if blocks else {k: a[0] for k, a in zip(names, out, strict=True)}
                )
        finally:
            close_stream(it)

    def _at(self, item: int, pos: int, what: str = "block at step") -> str:
        return f"plugin {self.plugin!r} item {self.name(item)!r} {what} {pos}"


def _read_only(a: Any) -> np.ndarray:
    """A read-only view: a block may be a view of a source's window, kept and read again by later batches."""
    v = np.asarray(a).view()
    v.flags.writeable = False
    return v


def raw_fields(fill_spec: FillSpec) -> tuple[Field, ...]:
    """The fields a producer reads from the source (the transform's input, or the loader's fields)."""
    return fill_spec.source_fields if fill_spec.source_fields is not None else fill_spec.fields
