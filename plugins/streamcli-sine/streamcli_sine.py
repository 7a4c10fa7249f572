"""A complete streamcli plugin: N streams, each a sine wave whose frequency depends on the stream."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from streamcli import BaseSource, Field


class SineSource(BaseSource):
    """``count`` streams of ``steps`` steps; stream i is a sine of frequency i + 1 sampled at ``width`` points."""

    def __init__(self, count: int = 8, *, steps: int = 100, width: int = 32) -> None:
        # Bad input is a ValueError that names the value and the fix: the CLI shows it as a usage error.
        for name, value in (("count", count), ("steps", steps), ("width", width)):
            if int(value) < 1:
                raise ValueError(f"{name}={value} must be at least 1, e.g. {name}=8")
        self.count, self.steps, self.width = int(count), int(steps), int(width)

    def items(self) -> list[int]:
        return list(range(self.count))  # one item per stream

    def fields(self) -> list[Field]:
        return [Field("wave", (self.width,), "float32")]

    def length(self, item: int) -> int:
        return self.steps

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        x = np.arange(self.width, dtype=np.float32) / self.width
        for t in range(start, self.steps):  # steps from `start` on: resume is exact
            yield {"wave": np.sin(2 * np.pi * (1 + item) * (x + t / 10)).astype(np.float32)}
