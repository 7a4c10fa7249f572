"""How many batches an epoch holds, computed from stream lengths without reading any stream.

It replays the producers' rule on lengths alone: rows claim tickets in canonical (step, row) order, a stream
of length L claimed at global step s occupies steps s .. s+L-1 of its row, and the row claims again at the
next step ("pack") or at the next batch's first step ("pad"). ``len(loader)`` uses it, and the property
tests check it against real epochs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def count_batches(lengths: Sequence[int], batch_size: int, time_steps: int, boundary: str, epoch_end: str) -> int:
    """Batches yielded in an epoch whose streams, in ticket order, have these lengths."""
    B, T, n = batch_size, time_steps, len(lengths)
    if not any(lengths):
        return 0
    heap = [(b, b) for b in range(B)]  # (canonical key of the next claim, row)
    ticket = 0
    last_step = -1  # global step of the last original step
    last_ticket_batch = 0  # batch in which ticket n-1 was taken
    first_dry_batch: int | None = None
    while heap:
        key, b = heapq.heappop(heap)
        while ticket < n and lengths[ticket] == 0:  # empty streams: claim again at the same key
            ticket += 1
            if ticket == n:
                last_ticket_batch = key // (T * B)
        if ticket >= n:
            if first_dry_batch is None:
                first_dry_batch = key // (T * B)
            continue  # this row runs dry (or replays, which never extend the epoch)
        step = key // B
        end = step + lengths[ticket] - 1
        ticket += 1
        if ticket == n:
            last_ticket_batch = key // (T * B)
        last_step = max(last_step, end)
        nxt = end + 1 if boundary == "pack" else (end // T + 1) * T
        heapq.heappush(heap, (nxt * B + b, b))
    batches = last_step // T + 1
    if epoch_end == "restream":
        return max(batches, last_ticket_batch + 1)
    if epoch_end == "drop":
        assert first_dry_batch is not None
        return min(batches, first_dry_batch)
    return batches
