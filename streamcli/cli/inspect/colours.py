"""A stream's colour: the same stream has the same colour in the grid, the rows table and a followed strip."""

from __future__ import annotations

import colorsys

GOLDEN = 0.618033988749895  # consecutive stream ids land far apart on the colour wheel


def stream_colour(stream: int) -> str:
    """``#rrggbb`` for stream id ``stream`` (grey for padding, ``-1``)."""
    if stream < 0:
        return "#4e4e4e"
    r, g, b = colorsys.hsv_to_rgb((stream * GOLDEN) % 1.0, 0.55, 0.95)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
