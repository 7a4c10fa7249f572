"""What one full decode of a video file found (``Scan``), whichever decoder made it: shared by the scan cache
(``_scan``) and both decoders, below all of them."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Scan:
    """What one full decode of a file found: raw ``POS_MSEC`` and pixel checksum per frame."""

    pos_ms: npt.NDArray[np.float64]
    adler: npt.NDArray[np.uint32]
    opened: bool = True
    cut: bool = False  # the decode stopped at a frame FFmpeg could not convert (see ``_decode``)

    @property
    def frames(self) -> int:
        return len(self.pos_ms)

    @property
    def seekable(self) -> bool:
        """Whether frames can be told apart by time, which seeking needs to verify where it landed.

        Also what makes ``time_ms`` the raw container time for every frame (``_decode.Clock`` passes finite,
        non-negative, increasing times through), so a seek and a sequential decode give the same times.
        """
        t = self.pos_ms
        return bool(self.frames > 1 and np.all(np.isfinite(t)) and t[0] >= 0 and np.all(np.diff(t) > 0))


def checksum(frame: npt.NDArray[np.uint8]) -> int:
    return zlib.adler32(np.ascontiguousarray(frame).data)
