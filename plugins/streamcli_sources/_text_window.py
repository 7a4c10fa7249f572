"""Random access (``window``) to a 1-D array read in fixed-width steps: a file's bytes (``text``) or a document's
token ids (``tokens``), and each step's count of real values, read by slices of one memory map, the last step
zero-padded."""

from __future__ import annotations

import numpy as np


class PaddedSteps:
    """The steps of ``data`` in chunks of ``w`` values, the last one zero-padded, read by slices (views but for
    that one)."""

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
        out = np.zeros((max(b - a, 0), w), self.data.dtype)
        chunk = self.data[a * w : b * w]
        out.reshape(-1)[: len(chunk)] = chunk
        return out


class ByteCounts:
    """Each step's count of real values: ``w`` but on the last step."""

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
