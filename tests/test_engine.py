"""The engine's parts on their own: the plan's count, the ring and its control block, the worker pool."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np
import pytest
from _sources import CountingSource

from streamcli import Field, LoaderConfig
from streamcli.errors import WorkerError
from streamcli.fills.spec import FillSpec
from streamcli.scheduled import cursor
from streamcli.scheduled.claims import count_batches
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.streams import all_streams, epoch_streams, rank_of_streams
from streamcli.shared.control import epoch_rows
from streamcli.shared.ring import Ring
from streamcli.shared.segment import sweep_stale
from streamcli.workers.pool import WorkerPool, shutdown
from streamcli.workers.worker import WorkerSpec

FIELDS = (Field("x", (2,), "int64"),)


# ---------------------------------------------------------------------------------------------- plan


@pytest.mark.parametrize(
    ("lengths", "B", "T", "boundary", "epoch_end", "want"),
    [
        ([3, 5], 1, 2, "pad", "pad", 5),  # 3 steps (2 batches), then 5 from batch 2: steps 4..8
        ([3, 5], 1, 2, "pack", "pad", 4),  # 8 steps back to back
        ([3, 5], 2, 2, "pad", "pad", 3),  # side by side: the longer one decides
        ([3, 5], 2, 2, "pad", "drop", 2),  # row 0 runs dry at batch 2: stop before it
        ([3, 5, 1], 2, 2, "pad", "restream", 3),
        ([0, 0], 2, 2, "pad", "pad", 0),
        ([], 2, 2, "pad", "pad", 0),
    ],
)
def test_count_batches_by_hand(lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, want: int) -> None:
    assert count_batches(lengths, B, T, boundary, epoch_end) == want


def test_epoch_streams_segments_shuffle_and_ranks() -> None:
    base = all_streams([7, 0, 3], 3)
    assert base.items.tolist() == [0, 0, 0, 1, 2] and base.starts.tolist() == [0, 3, 6, 0, 0]
    assert base.lengths is not None and base.lengths.tolist() == [3, 3, 1, 0, 3]
    a = epoch_streams(base, seed=1, epoch=0, shuffle=True)
    assert sorted(zip(a.items.tolist(), a.starts.tolist(), strict=True)) == sorted(
        zip(base.items.tolist(), base.starts.tolist(), strict=True)
    )
    ranks = rank_of_streams(a, 2)
    assert set(ranks.tolist()) == {0, 1}
    assert all_streams([None, 4], 2).lengths is None  # unknown: open-ended, no table of lengths
    assert all_streams([None, 4], 2).open_ended.tolist() == [True, False, False]


# ---------------------------------------------------------------------------------------------- ring


def spec_args(workers: int = 1, B: int = 2, T: int = 3) -> dict[str, object]:
    return dict(fields=FIELDS, batch_size=B, time_steps=T, num_slots=3, num_workers=workers, num_streams=5,
                layout="TB")  # fmt: skip


def _resident_kib(name: str) -> list[tuple[int, int]]:
    """(size, resident) in KiB of each mapping of ``/dev/shm/name`` in this process (``/proc/self/smaps``)."""
    out: list[tuple[int, int]] = []
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(f"/dev/shm/{name}"):
            fields = dict(x.split(":", 1) for x in lines[i + 1 : i + 6] if ":" in x)
            out.append((int(fields["Size"].split()[0]), int(fields["Rss"].split()[0])))
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_every_process_maps_the_whole_ring_at_once() -> None:
    # Else every first write of each page of each slot takes a fault in each process, all through the first lap
    # of the ring: the first batches of a run with workers came out several times slower than the rest.
    ring = Ring.create(spec_args(B=64, T=64))
    other = Ring.attach(ring.spec)
    try:
        maps = _resident_kib(ring.spec.name)
        assert len(maps) == 2 and maps[0][0] >= 64
        assert all(rss == size for size, rss in maps), maps
    finally:
        other.close()
        ring.close()


def test_ring_views_are_shared_and_the_owner_unlinks() -> None:
    ring = Ring.create(spec_args())
    other = Ring.attach(ring.spec)
    try:
        ring.slots[1]["x"][2, 1] = [7, 8]
        assert other.slots[1]["x"][2, 1].tolist() == [7, 8]
        assert ring.slots[0]["cursor"].shape == (2, cursor.WIDTH)
    finally:
        other.close()
        ring.close()
    assert not os.path.exists(f"/dev/shm/{ring.spec.name}")
    ring.close()  # twice is fine


def test_control_block_is_used_only_through_its_methods() -> None:
    ring = Ring.create(spec_args(workers=2))
    try:
        c = ring.control
        c.stage(cursor.fresh(2), first_batch=4)
        table = np.array([[3, 0, 0, 9], [1, 5, 1, -1]], np.int64)
        c.set_streams(table, tickets=1)
        assert c.first_batch == 4 and c.order_table().tolist() == table.tolist()
        assert c.take_ticket() == 1 and c.take_ticket() == 2
        # rows: row 0 is owned by producer 0, row 1 waits for a claim at key 25
        c.set_rows(np.array([0, -1]), np.array([30, 25]), np.array([4, 4]), cursor.fresh(2))
        assert c.earliest_claim() == 25 and c.written_min() == 4
        c.set_claim(1, 33)
        assert c.earliest_claim() == 30
        c.set_written(0, 5)
        c.set_written(1, 5)
        assert c.written_min() == 5
        c.open_epoch(7, first_batch=4)
        assert c.tables_ready(7) and c.handed == 4
        c.publish(4, slot=2)
        assert c.handed == 5 and c.slot_of(4) == 2
        c.report(0, busy=0.5, steps=6)
        c.report(1, busy=0.25, steps=4)
        c.mark_of(1)[:] = (1, 7, 0)  # what producer 1 is reading now, in next() (written before each read)
        assert c.steps() == (6, 4) and c.reading(1) == (1, 7)
        assert c.busy().tolist() == [0.5, 0.25]
        c.count_sent(1)
        assert c.sent(1) == 1 and c.sent(0) == 0
        # a live row handed over mid-stream to an idle producer, from the batch after its giver's last
        assert not c.idle_elsewhere(1)
        c.set_idle(0, True)
        assert c.idle_elsewhere(1) and not c.idle_elsewhere(0)
        c.set_idle(0, False)
        assert c.taker(0) is None
        c.set_idle(1, True)
        assert c.taker(1) is None and c.taker(0) == 1  # never itself
        c.set_written(1, 6)
        assert c.hand_over(1, 1, 6, [5, 2, RowPhase.LIVE, 0]) and c.moving == (1, 1, 6)
        assert c.owned_by(1)[0].tolist() == [False, True]
        assert c.taker(0) is None and not c.hand_over(0, 1, 6, [3, 11, RowPhase.LIVE, 0])  # one at a time
        assert c.arrived(0) is None and c.moved == 0
        got2 = c.arrived(1)
        assert got2 is not None and got2[:2] == (1, 6) and got2[2].tolist() == [5, 2, RowPhase.LIVE, 0]
        assert c.moving[0] == -1 and c.moved == 1 and c.taker(0) == 1
        c.set_generation(3)
        assert c.generation == 3
    finally:
        ring.close()


def test_sweep_removes_only_segments_of_dead_processes() -> None:
    # The sweep runs on a folder of its own in /dev/shm: another test's loader, running in parallel, sweeps
    # /dev/shm itself and would take the planted dead segment first. Our live segment is there as a hard link.
    mine = Ring.create(spec_args())
    root = tempfile.mkdtemp(prefix="streamcli-test-sweep-", dir="/dev/shm")
    dead = f"{root}/streamcli_999999999_deadbeef"
    with open(dead, "wb") as f:
        f.write(b"\0")
    os.utime(dead, (time.time() - 60, time.time() - 60))  # not one its creator may be about to lock
    os.link(f"/dev/shm/{mine.spec.name}", f"{root}/{mine.spec.name}")
    try:
        assert sweep_stale(root) == ["streamcli_999999999_deadbeef"]
        assert os.path.exists(f"{root}/{mine.spec.name}") and os.path.exists(f"/dev/shm/{mine.spec.name}")
    finally:
        mine.close()
        shutil.rmtree(root)


# ---------------------------------------------------------------------------------------------- pool


@pytest.mark.slow
def test_pool_fills_an_assigned_slot_and_reports_a_dead_worker(no_leaks: None) -> None:
    src = CountingSource([4, 2])
    ring = Ring.create(spec_args(workers=1, B=2, T=3))
    plan = FillSpec(plugin="counting", fields=FIELDS, config=LoaderConfig(2, 3, num_workers=1))
    spec = WorkerSpec(w=0, fill_spec=plan, ring=ring.spec, source=src, items=src.items())
    pool = WorkerPool([spec], ring, "spawn", str)
    try:
        ring.control.stage(cursor.fresh(2), 0)
        ring.control.set_generation(1)
        pool.start_epoch(1, timeout=60)
        table = np.array([[0, 0, 0, 4], [1, 0, 0, 2]], np.int64)
        ring.control.set_streams(table, tickets=0)
        ring.control.set_rows(*epoch_rows(cursor.fresh(2), 0, 3, [(0, 2)]))
        ring.control.open_epoch(1, 0)
        ring.control.publish(0, 2)
        pool.wait_batch(0, timeout=60)
        x, valid = ring.slots[2]["x"], ring.slots[2]["valid"]
        assert valid.tolist() == [[True, True], [True, True], [True, False]]
        assert x[:, 0].tolist() == [[0, 0], [0, 1], [0, 2]] and x[:2, 1].tolist() == [[1, 0], [1, 1]]
        assert ring.slots[2]["cursor"][0].tolist() == [0, 3, RowPhase.LIVE, 0]  # row 0 goes on at step 3
        pool.procs[0].kill()
        pool.procs[0].join(5)
        with pytest.raises(WorkerError, match=r"worker 0 .* died with signal SIGKILL"):
            ring.control.publish(1, 0)
            pool.wait_batch(1, timeout=60)
    finally:
        shutdown(pool, ring)


# ---------------------------------------------------------------------------------------- slot writes


@pytest.mark.parametrize(("pad", "T"), [(0, 4), (0, 600), (3, 4), (3, 300)])
@pytest.mark.parametrize(
    "workers", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_steps_land_where_their_flags_say_in_small_and_large_slots(
    pad: int, T: int, workers: int, no_leaks: None
) -> None:
    """In short and long batches, for one field or several, in process and by one or two workers, every field of
    every step must land where the flags say."""
    from streamcli import StreamLoader

    source = CountingSource([37, 1250, 5, 630, 64, 9], pad=pad)
    seen = 0
    with StreamLoader(source, 4, T, num_workers=workers, boundary="pack") as loader:
        for batch in loader:
            x, valid = batch.data["x"].numpy(), batch.valid.numpy()
            stream, pos = batch.stream.numpy(), batch.position.numpy()
            assert (x[valid][:, 0] == stream[valid]).all() and (x[valid][:, 1] == pos[valid]).all()
            assert not x[~valid].any()  # padding is zeros
            if pad:
                blob = batch.data["blob"].numpy()
                assert (blob[valid] == ((stream[valid] * 31 + pos[valid]) % 251)[:, None]).all()
                assert not blob[~valid].any()
            seen += int(valid.sum())
    assert seen == sum(source.lengths)
