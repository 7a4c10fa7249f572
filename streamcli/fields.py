"""A field of a step: its name, per-step shape and dtype, and how a viewer should show it.

Separate from ``source`` (which re-exports ``Field`` as part of the plugin contract) because every layer reads
fields, not only sources: the ring's layout, the transforms, the shards and the CLI's viewers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DISPLAY_KINDS = ("image", "text", "audio", "series", "other")
"""How a field may ask to be shown (``Field.display``); ``""`` lets the viewer infer it."""


RESERVED_PREFIX = "flag."
"""Field names never begin with it: an export names its flags ``flag.<name>`` beside ``data.<field>``."""


def valid_name(name: str) -> bool:
    """A field name is one identifier or several joined by dots (LeRobot's ``observation.state``), so it reads as
    ``batch[name]`` and names a shard member ``data.<name>`` unambiguously; the ``flag.`` prefix is reserved."""
    return all(part.isidentifier() for part in name.split(".")) and not name.startswith(RESERVED_PREFIX)


@dataclass(frozen=True)
class Field:
    """The name, per-step shape and dtype of one field of a step, and how a viewer should show it.

    ``display`` is a hint for viewers such as ``streamcli preview``, so that a plugin's fields render well
    without the viewer knowing their names:

    - ``"image"``: an image, HWC or CHW with 1, 3 or 4 channels (uint8, or float in [0, 1]);
    - ``"text"``: bytes of UTF-8 text; shown up to the first NUL byte. ``"text:nbytes"`` names a companion
      integer field that holds each step's byte count instead (that field is then not shown on its own);
    - ``"audio"``: samples, ``[samples]`` or ``[samples, channels]``;
    - ``"series"``: a few numbers a step, ``[dims]`` (a robot's state or action, an IMU sample): each dimension
      shown as a sparkline over the row's recent steps;
    - ``"other"``: summarised as numbers;
    - ``""`` (the default): inferred from shape and dtype (image-like arrays as images, 1-D uint8 as text,
      int16 or float signals as audio, the rest as numbers).

    The hint changes nothing in the batches: it is not part of an export's format.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    display: str = ""

    def __post_init__(self) -> None:
        if not valid_name(self.name):
            raise ValueError(
                f"field name {self.name!r} must be a Python identifier or dotted identifiers, e.g. 'frame' or "
                f"'observation.state', and not begin with {RESERVED_PREFIX!r}"
            )
        kind, sep, companion = self.display.partition(":")
        if kind not in ("", *DISPLAY_KINDS) or (sep and (kind != "text" or not companion.isidentifier())):
            raise ValueError(
                f"field {self.name!r}: display={self.display!r} must be one of {', '.join(DISPLAY_KINDS)} or "
                "empty (inferred); a text field may name its byte-count field, e.g. display='text:nbytes'"
            )
        if any(int(d) < 0 for d in self.shape):
            raise ValueError(f"field {self.name!r} has a negative dimension in shape {self.shape}")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype).str)  # canonical, e.g. '|u1'

    @property
    def display_kind(self) -> str:
        """``image``, ``text``, ``audio``, ``series``, ``other``, or ``""`` (infer)."""
        return self.display.partition(":")[0]

    @property
    def length_field(self) -> str | None:
        """For ``display="text:nbytes"``: the field holding each step's byte count."""
        return self.display.partition(":")[2] or None

    @property
    def np_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of one step of this field."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.np_dtype.itemsize

    def describe(self) -> str:
        """Human form, e.g. ``frame uint8[3, 64, 64]``."""
        return f"{self.name} {self.np_dtype.name}[{', '.join(map(str, self.shape))}]"
