"""How ``texture.png``, the camera source's built-in plane, was made (it ships as a file, so frames do not
depend on the numpy or OpenCV version). Regenerate with ``python -m streamcli_sources._texture out.png``.

Coloured 1/f noise, filtered in the Fourier domain so that it tiles seamlessly (the camera wraps around the
plane), then partly posterised so that it has sharp edges as well as smooth gradients at every scale: the
structure motion estimation needs.
"""

from __future__ import annotations

import sys

import cv2
import numpy as np
import numpy.typing as npt


def make_texture(size: int = 512, seed: int = 1) -> npt.NDArray[np.uint8]:
    """A tileable ``size`` x ``size`` BGR texture."""
    rng = np.random.default_rng(seed)
    f = np.fft.fftfreq(size)
    radius = np.hypot(f[:, None], f[None, :])
    radius[0, 0] = 1.0
    out = np.empty((size, size, 3), np.float64)
    for c in range(3):
        spectrum = np.fft.fft2(rng.standard_normal((size, size))) / radius**1.6
        layer = np.real(np.fft.ifft2(spectrum))
        layer = (layer - layer.mean()) / layer.std()
        edges = np.round(layer * 1.5) / 1.5  # posterised copy: hard edges at level crossings
        out[..., c] = 0.3 * layer + 0.7 * edges
    out = (out - out.min()) / (out.max() - out.min()) * 255.0
    texture: npt.NDArray[np.uint8] = np.clip(out, 0, 255).astype(np.uint8)
    return texture


if __name__ == "__main__":
    cv2.imwrite(sys.argv[1], make_texture(), [cv2.IMWRITE_PNG_COMPRESSION, 9])
