"""Opening a row's stream: the one place where a producer marks what it reads, calls the source's ``open``,
reports a source that fails to open, and wraps the loader's transform round what it yields.

Iterator sources are opened at a stream's first step, or where a resumed or moved row goes on
(``open(item, start=pos)``): nothing is replayed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from streamcli.fills.faults import SOURCE_ERRORS, Faults
from streamcli.fills.transformed import Transformer
from streamcli.shared.control.layout import OPENING
from streamcli.source import StreamSource


def open_stream(
    source: StreamSource,
    faults: Faults,
    mark: np.ndarray,
    tf: Transformer | None,
    blocks: bool,
    item: int,
    pos: int,
) -> Iterator[Any] | None:
    """Stream ``item`` from step ``pos``, transformed; None if it failed to open under on_error="skip" (reported
    as skipped; under "raise" the failure raises ``SourceError``)."""
    mark[0], mark[1], mark[2] = item, pos, OPENING  # a death or a stall while opening names this stream
    faults.check_data(item)
    try:
        it = iter(source.open(faults.items[item], pos))
    except SOURCE_ERRORS as exc:
        faults.fail(item, pos, exc, "opening")
        return None
    return it if tf is None else tf.wrap(it, item, pos, blocks)
