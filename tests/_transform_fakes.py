"""Sources and transforms for the transform tests, in an importable module so spawned workers can unpickle them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from _sources import CountingSource

from streamcli import BaseSource, Field
from streamcli.transforms import Context

DRAW_HIGH = 1 << 40


class DrawTransform:
    """Adds the stream's draw from ``ctx.seed`` to every step (field ``draw``), with ``ctx.position + i``
    (``at``) and ``ctx.epoch`` (``ep``): what the tests compare against the step's own position."""

    def fields(self, fields: Sequence[Field]) -> list[Field]:
        return [*fields, Field("draw", (), "int64"), Field("at", (), "int64"), Field("ep", (), "int64")]

    def __call__(self, block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]:
        n = len(block["x"])
        draw = np.random.default_rng(ctx.seed).integers(0, DRAW_HIGH)
        return {
            **block,
            "draw": np.full(n, draw, np.int64),
            "at": ctx.position + np.arange(n, dtype=np.int64),
            "ep": np.full(n, ctx.epoch, np.int64),
        }


class WrongShapeTransform:
    """Returns ``x`` with a column too many, without declaring it."""

    def __call__(self, block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]:
        return {"x": np.zeros((len(block["x"]), 3), np.int64)}


class WindowSource(CountingSource):
    """``CountingSource`` with random access (``window``): the planned path's whole-batch fills."""

    def window(self, item: int) -> dict[str, np.ndarray]:
        n = self.lengths[item]
        return {"x": np.stack([np.full(n, item), np.arange(n)], axis=1).astype(np.int64)}


class BlockSource(CountingSource):
    """``CountingSource`` that yields blocks of ``size`` steps (``block_steps = True``)."""

    block_steps = True

    def __init__(self, lengths: Sequence[int], *, size: int = 3, report_length: bool = True) -> None:
        super().__init__(lengths, report_length=report_length)
        self.size = size

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:  # type: ignore[override]
        for p in range(start, self.lengths[item], self.size):
            q = np.arange(p, min(p + self.size, self.lengths[item]), dtype=np.int64)
            yield {"x": np.stack([np.full(len(q), item), q], axis=1)}


class ImageSource(BaseSource):
    """Stream i: ``frame`` uint8 frames (CHW, or HWC with ``hwc=True``) whose pixels encode the item, the step
    and the pixel's place, plus ``x = [i, p]``."""

    def __init__(self, lengths: Sequence[int], *, size: tuple[int, int] = (12, 16), hwc: bool = False,
                 report_length: bool = True) -> None:  # fmt: skip
        self.lengths, self.size, self.hwc, self.report_length = list(lengths), size, hwc, report_length

    def items(self) -> list[int]:
        return list(range(len(self.lengths)))

    def fields(self) -> list[Field]:
        h, w = self.size
        return [Field("frame", (h, w, 3) if self.hwc else (3, h, w), "uint8", display="image"),
                Field("x", (2,), "int64")]  # fmt: skip

    def length(self, item: int) -> int | None:
        return self.lengths[item] if self.report_length else None

    def frame(self, item: int, p: int) -> np.ndarray:
        h, w = self.size
        y, x = np.mgrid[0:h, 0:w]
        chw = np.stack([(y * w + x + item * 11 + p * 5 + c * 40) % 256 for c in range(3)]).astype(np.uint8)
        return chw.transpose(1, 2, 0).copy() if self.hwc else chw

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, Any]]:
        for p in range(start, self.lengths[item]):
            yield {"frame": self.frame(item, p), "x": np.array([item, p], np.int64)}
