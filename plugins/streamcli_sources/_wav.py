"""WAV files for the audio source: a file's header, its samples as int16, and steps of them read by slices."""

from __future__ import annotations

import contextlib
import os
import wave
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from streamcli.storage import urls


@dataclass(frozen=True)
class Header:
    rate: int
    channels: int
    width: int  # bytes per sample
    frames: int  # sample frames really present (the header's count, capped by the file's size)

    def describe(self) -> str:
        return f"{self.rate} Hz, {self.channels} channel{'s' * (self.channels != 1)}"


class PaddedFrames:
    """``(frames, channels)`` samples as steps of ``n`` frames, the last one zero-padded, read by slices."""

    def __init__(self, pcm: np.ndarray, steps: int, n: int) -> None:
        self.pcm, self.steps, self.n = pcm, steps, n
        self.full = len(pcm) // n

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.steps)
        n, ch = self.n, self.pcm.shape[1]
        if b <= self.full:
            return self.pcm[a * n : b * n].reshape(b - a, n, ch)
        out = np.zeros((max(b - a, 0), n, ch), np.int16)
        chunk = self.pcm[a * n : b * n]
        out.reshape(-1, ch)[: len(chunk)] = chunk
        return out


class Counts:
    """Each step's count of real frames: ``n`` but on a file's last step."""

    def __init__(self, frames: int, steps: int, n: int) -> None:
        self.frames, self.steps, self.n = frames, steps, n

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.steps)
        return np.minimum(self.n, self.frames - np.arange(a, b) * self.n).astype(np.int32)


@contextlib.contextmanager
def local_file(path: str) -> Iterator[str]:
    """A local file holding ``path``: itself, or the cached copy of an object at a URL, pinned in the cache until
    the block ends (another process's eviction would otherwise remove it between the fetch and the open)."""
    if not urls.is_remote(path):
        yield path
        return
    from streamcli.storage.cache import default

    with default().pinned(path) as local:
        yield str(local)


def read_header(path: str) -> Header:
    with open(path, "rb") as f, wave.open(f) as w:
        # wave stops right after the data chunk's header, so what follows is (at most) the samples.
        block = w.getsampwidth() * w.getnchannels()
        present = (os.fstat(f.fileno()).st_size - f.tell()) // block
        return Header(w.getframerate(), w.getnchannels(), w.getsampwidth(), min(w.getnframes(), present))


def to_int16(raw: bytes, width: int) -> npt.NDArray[np.int16]:
    if width == 2:
        return np.frombuffer(raw, "<i2").astype(np.int16)
    if width == 1:  # unsigned 8-bit
        return ((np.frombuffer(raw, np.uint8).astype(np.int16) - 128) << 8).astype(np.int16)
    b = np.frombuffer(raw, np.uint8).reshape(-1, width)
    return b[:, -2:].copy().view("<i2").reshape(-1).astype(np.int16)  # top 16 bits, little-endian
