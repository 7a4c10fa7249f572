"""The transform contract: what a transform is called with (``Context``), its seed, and its output fields.

A transform runs in the producers (the workers, or the main process when ``num_workers=0``) on each block of
steps as it is read, before it is written into the batch::

    def transform(block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]: ...

``block`` maps every field to an array of shape ``(n, *field.shape)``. ``ctx.seed`` is fixed for one stream
(item) in one epoch. A transform that changes a field's shape or dtype says so with an optional
``fields(fields) -> fields`` member (``output_fields``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from streamcli.source import Field

Block = dict[str, np.ndarray]


@dataclass(frozen=True)
class Context:
    """Where a block comes from: ``stream`` (the item's index), ``position`` (the item position of the block's
    first step), ``epoch``, and ``seed``, an int fixed for one stream in one epoch (``stream_seed``)."""

    stream: int
    position: int
    epoch: int
    seed: int

    def rng(self) -> np.random.Generator:
        """A generator that gives the same draws at every call for this stream and epoch."""
        return np.random.default_rng(self.seed)


class Transform(Protocol):
    """What ``StreamLoader(transform=...)`` calls; an optional ``fields(fields) -> fields`` member declares a
    changed output layout (see ``output_fields``)."""

    def __call__(self, block: Block, ctx: Context) -> Mapping[str, Any]: ...


def stream_seed(seed: int, epoch: int, stream: int) -> int:
    """``ctx.seed``: derived from the loader's seed, the epoch and the stream alone."""
    return int(np.random.SeedSequence([seed, epoch, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def output_fields(transform: Any, fields: Sequence[Field]) -> tuple[Field, ...]:
    """The fields a transform writes: ``transform.fields(fields)`` if it has that member, else ``fields``.

    Raises ``TypeError`` if ``transform`` is not callable, ``ValueError`` if its declared fields are not valid."""
    if not callable(transform):
        raise TypeError(f"transform={transform!r} must be callable as transform(block, ctx) -> block")
    fn = getattr(transform, "fields", None)
    if not callable(fn):
        return tuple(fields)
    out = tuple(fn(tuple(fields)))
    if not out or not all(isinstance(f, Field) for f in out):
        raise ValueError(f"{type(transform).__name__}.fields() must return a non-empty sequence of Field, got {out!r}")
    return out
