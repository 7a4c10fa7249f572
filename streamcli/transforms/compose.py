"""``Compose``: transforms chained in order, each with its own seed and the image layouts carried along."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamcli.source import Field
from streamcli.transforms.contract import Block, Context, output_fields
from streamcli.transforms.image import ImageTransform, Layout


class Compose:
    """Apply ``transforms`` in order. Each gets its own seed, derived from ``ctx.seed`` and its place, so the
    draws of two members are independent and each stays fixed for the stream."""

    def __init__(self, transforms: Sequence[Callable[..., Any]]) -> None:
        self.transforms = list(transforms)
        for t in self.transforms:
            if not callable(t):
                raise TypeError(f"Compose: {t!r} is not callable as transform(block, ctx) -> block")

    def fields(self, fields: Sequence[Field]) -> tuple[Field, ...]:
        out = tuple(fields)
        layouts: dict[str, Layout] = {}  # image layouts known so far; a crop or resize keeps the axes' places
        for t in self.transforms:
            if isinstance(t, ImageTransform):
                new = t.fields(out, layouts)
                layouts.update(t.layouts)
            else:
                new = output_fields(t, out)
            before, after = {f.name: len(f.shape) for f in out}, {f.name: len(f.shape) for f in new}
            layouts = {k: v for k, v in layouts.items() if before.get(k) == after.get(k)}  # gone or reshaped: forget
            out = new
        return out

    def __call__(self, block: Block, ctx: Context) -> Block:
        out: Any = block
        for i, t in enumerate(self.transforms):
            seed = int(np.random.SeedSequence([ctx.seed, i]).generate_state(1, np.uint64)[0] >> np.uint64(1))
            out = {k: np.asarray(v) for k, v in t(out, dataclasses.replace(ctx, seed=seed)).items()}
        return dict(out)

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"
