"""Batch lifetime and closing: a held batch is never overwritten; close() is final and idempotent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from _invariants import collect
from _sources import CountingSource

from streamcli import StreamLoader

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_held_batches_are_never_overwritten(no_leaks: None) -> None:
    lengths = [30, 17, 25, 40, 8, 33]
    with StreamLoader(CountingSource(lengths, pad=64), 3, 4, seed=1) as ref_loader:
        ref = collect(ref_loader)
    with StreamLoader(CountingSource(lengths, pad=64), 3, 4, seed=1, num_workers=2, prefetch=2) as loader:
        hoard = list(loader)  # every batch held at once: far more than the ring's slots
        assert loader.stats.copies > 0
        for want, got in zip(ref, hoard, strict=True):
            assert np.array_equal(want["x"], got["x"].numpy())
            assert np.array_equal(want["blob"], got["blob"].numpy())
        # A tensor kept from one batch outlives the batch object and stays intact while others flow.
        kept = None
        for i, batch in enumerate(loader):
            if i == 0:
                kept, kept_copy = batch["blob"], batch["blob"].clone()
        assert kept is not None and torch.equal(kept, kept_copy)


def test_zero_copy_views_when_batches_are_released() -> None:
    with StreamLoader(CountingSource([50] * 4), 4, 2) as loader:
        for _batch in loader:
            pass
        assert loader.stats.copies == 0 and loader.stats.batches == 25


def test_the_loader_keeps_no_reference_to_a_batch_it_handed_out() -> None:
    # In-process, a batch dropped before the next ``next()`` frees its slot for that next batch, which is then
    # written into memory still in the CPU's caches (``HandOut.fill_window``).
    with StreamLoader(CountingSource([50] * 4), 4, 2) as loader:
        it = iter(loader)
        where = {next(it).valid.data_ptr() for _ in range(10)}
        assert len(where) == 1


def test_close_is_idempotent_and_final(no_leaks: None) -> None:
    loader = StreamLoader(CountingSource([4]), 1, 2)
    loader.close()
    loader.close()
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)


def test_iterating_after_close_is_an_error() -> None:
    loader = StreamLoader(CountingSource([9, 9]), 2, 2)
    it = iter(loader)
    next(it)
    loader.close()
    with pytest.raises(RuntimeError, match="closed while iterating"):
        next(it)


class _Handed:
    """A stand-in for the control block: records the slot published for each batch."""

    def __init__(self) -> None:
        self.slots: dict[int, int] = {}

    def publish(self, k: int, slot: int) -> None:
        self.slots[k] = slot


def test_slots_keep_a_lent_slot_until_every_view_is_gone() -> None:
    import ctypes
    import gc

    from streamcli.shared.slots import Slots

    control, leases = _Handed(), Slots(4)
    assert leases.assign(control, 0, 3) == 3  # batches 0-2 get a slot each; one slot stays free
    holders = [(ctypes.c_ubyte * 8)() for _ in range(2)]  # what ``Ring.holder`` makes for each batch
    lent = []
    for k in range(2):
        lent.append(leases.take(k))
        leases.lend(holders[k], lent[-1])
    assert leases.crowded()  # two of four slots lent: one more would leave the producers fewer than two
    view = np.frombuffer(holders[0], np.uint8)[2:]  # an array over a holder keeps it alive, as tensors do
    del holders
    gc.collect()  # holder 1 died: its slot is free again; holder 0 lives on through ``view``
    leases.new_epoch()  # batch 2's slot comes back too
    assert leases.assign(control, 0, 10) == 3
    assert lent[0] not in control.slots.values() and lent[1] in control.slots.values()
    assert not leases.crowded()
    del view
    gc.collect()
    leases.new_epoch()
    assert leases.assign(control, 0, 10) == 4  # the consumer let go of everything: all four slots
