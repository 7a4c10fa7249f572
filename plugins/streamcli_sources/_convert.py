"""A decoded BGR frame to the video source's layout: resized, RGB or grey, channels first."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

INTERPOLATION = {"linear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA, "nearest": cv2.INTER_NEAREST}


def convert(bgr: npt.NDArray[np.uint8], size: tuple[int, int], gray: bool, interpolation: str) -> npt.NDArray[np.uint8]:
    """Resize first (the colour conversion is then done on the small image), then RGB/gray, CHW."""
    h, w = size
    img: Any = bgr
    if bgr.shape[0] != h or bgr.shape[1] != w:
        img = cv2.resize(bgr, (w, h), interpolation=INTERPOLATION[interpolation])
    if gray:
        out: npt.NDArray[np.uint8] = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)[None]
        return out
    return np.ascontiguousarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB).transpose(2, 0, 1))
