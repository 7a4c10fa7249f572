"""The text source's random access (``window``): a file's bytes as fixed-width steps and their byte counts, read by
slices of one memory map, the last step zero-padded."""

from __future__ import annotations

import numpy as np


class PaddedSteps:
    """The steps of ``data`` in chunks of ``w`` bytes, the last one zero-padded, read by slices."""

    def __init__(self, data: np.ndarray, n: int, w: int) -> None:
        self.data, self.n, self.w = data, n, w
        self.full = len(data) // w  # steps that need no padding

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        w = self.w
        if b <= self.full:
            return self.data[a * w : b * w].reshape(b - a, w)
        out = np.zeros((max(b - a, 0), w), np.uint8)
        chunk = self.data[a * w : b * w]
        out.reshape(-1)[: len(chunk)] = chunk
        return out


class ByteCounts:
    """Each step's count of real bytes: ``w`` but on a file's last step."""

    def __init__(self, size: int, n: int, w: int) -> None:
        self.size, self.n, self.w = size, n, w
        self._full = np.full(4096, w, np.int32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        if b < self.n and b - a <= len(self._full):
            return self._full[: max(b - a, 0)]
        return np.minimum(self.w, self.size - np.arange(a, b) * self.w).astype(np.int32)
