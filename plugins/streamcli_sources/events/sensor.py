"""The sensor grid an events source's recordings share: given, read from their files, or the extent of their events.

Separate from the source because it is settled once, over every recording's index, before any step is cut: a
recording with an event outside it is refused here, naming the size that would hold it.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamcli_sources.events.windows import Index


def sensor_size(indexes: Mapping[str, Index], given: tuple[int, int] | None) -> tuple[int, int]:
    """``(height, width)``: ``given`` if set, else the size the files record (all must agree), else the smallest
    that holds every event; every recording's events must lie on it."""
    h, w = given if given is not None else _found(indexes)
    for path, ix in indexes.items():
        if ix.max_x >= w or ix.max_y >= h:
            raise ValueError(
                f"{path} has events at x={ix.max_x}, y={ix.max_y}, outside sensor_size=({h}, {w}); "
                f"pass sensor_size=({max(h, ix.max_y + 1)}, {max(w, ix.max_x + 1)}) or larger"
            )
    return h, w


def _found(indexes: Mapping[str, Index]) -> tuple[int, int]:
    sizes = {ix.sensor_size for ix in indexes.values() if ix.sensor_size is not None}
    if len(sizes) > 1:
        raise ValueError(f"the recordings have different sensor sizes {sorted(sizes)}; pass sensor_size=(H, W)")
    if sizes:
        return sizes.pop()
    h = max(ix.max_y for ix in indexes.values()) + 1
    w = max(ix.max_x for ix in indexes.values()) + 1
    if h < 1:
        raise ValueError("every recording is empty, so the sensor size is unknown; pass sensor_size=(H, W)")
    return h, w
