"""Placeholder; the real loader lands in the next commit."""

from __future__ import annotations

from typing import Any


class StreamLoader:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("StreamLoader is being written")
