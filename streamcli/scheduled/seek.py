"""The loader's state at any batch, from stream lengths alone (a distributed export starts each task there): the
same engine runs over a stand-in source whose steps are one byte, so every claim follows the real rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from streamcli.scheduled.state import seal
from streamcli.source import BaseSource, Field, Step, StreamOrder

_ZERO = {"z": np.zeros((), np.uint8)}


class LengthsOnly(BaseSource):
    """``len(lengths)`` streams whose steps are a single zero byte; stream ``i`` has ``lengths[i]`` steps.
    ``order``: the real source's ``stream_order`` hook (a mix), so that the stand-in's epochs hold the same streams."""

    def __init__(self, lengths: Sequence[int], order: StreamOrder | None = None) -> None:
        self.lengths = [int(n) for n in lengths]
        if order is not None:
            self.stream_order = order

    def items(self) -> list[int]:
        return list(range(len(self.lengths)))

    def fields(self) -> Sequence[Field]:
        return (Field("z", (), "uint8"),)

    def length(self, item: int) -> int:
        return self.lengths[item]

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        for _ in range(start, self.lengths[item]):
            yield _ZERO


def state_after(
    loader_type: Callable[..., Any],
    lengths: Sequence[int],
    batches: int,
    fingerprint: dict[str, Any],
    *,
    order: StreamOrder | None = None,
    **loader_kw: Any,
) -> dict[str, Any]:
    """The state of a loader over streams of these ``lengths`` after it has handed out ``batches`` batches
    (counted across epochs, as an export counts them), carrying ``fingerprint`` (the real loader's); ``order``: the
    real source's ``stream_order`` hook, if it has one.

    ``loader_type`` is ``StreamLoader``, passed in by the caller: the engine does not import the loader above it."""
    kw = {k: v for k, v in loader_kw.items() if k not in ("num_workers", "pin_memory", "prefetch", "timeout")}
    B, T = kw.pop("batch_size"), kw.pop("time_steps")
    with loader_type(LengthsOnly(lengths, order), B, T, num_workers=0, **kw) as loader:
        n = 0
        while n < batches:
            got = 0
            for _ in loader:
                n += 1
                got += 1
                if n >= batches:
                    break
            if not got:
                raise ValueError(f"the run has fewer than {batches} batches (it ended after {n})")
        state: dict[str, Any] = loader.state_dict()
    state["fingerprint"] = dict(fingerprint)
    return seal(state)
