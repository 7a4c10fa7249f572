"""How many batches an epoch holds, computed from stream lengths without reading any stream.

It replays the producers' rule on lengths alone, with the very schedule that producers follow when lengths are
known (``engine.claims.ClaimPlan``): rows claim tickets in canonical (step, row) order, a stream of length L
claimed at global step s occupies steps s .. s+L-1 of its row, and the row claims again at the next step
("pack") or at the next batch's first step ("pad"). ``len(loader)`` uses it, and the property tests check it
against real epochs.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamcli.engine.claims import ClaimPlan


def count_batches(lengths: Sequence[int], batch_size: int, time_steps: int, boundary: str, epoch_end: str) -> int:
    """Batches yielded in an epoch whose streams, in ticket order, have these lengths."""
    B, T, n = batch_size, time_steps, len(lengths)
    if not any(lengths):
        return 0
    # Replays never extend the epoch: plan without them, then "restream" runs until the last ticket's batch.
    plan = ClaimPlan(lengths, [(b, b) for b in range(B)], 0, B=B, T=T, pack=boundary == "pack", restream=False)
    last_step = -1  # epoch step of the last original step
    last_ticket_batch = 0  # batch in which ticket n-1 was taken
    first_dry_batch: int | None = None
    while plan.pending():
        key, _, claim = plan.advance()
        batch = key // (T * B)
        if claim.first <= n - 1 < claim.first + claim.count:
            last_ticket_batch = batch
        if claim.dry:
            if first_dry_batch is None:
                first_dry_batch = batch
            continue
        last_step = max(last_step, key // B + plan.steps_of(claim.first + claim.count - 1) - 1)
    batches = last_step // T + 1
    if epoch_end == "restream":
        return max(batches, last_ticket_batch + 1)
    if epoch_end == "drop":
        assert first_dry_batch is not None
        return min(batches, first_dry_batch)
    return batches
