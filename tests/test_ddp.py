"""Two ranks of a real DistributedDataParallel job on CPU (gloo): equal batch counts, disjoint and complete streams."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

LENGTHS = [23, 5, 0, 31, 12, 18, 9, 27, 3, 14, 20]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world_size: int, port: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from _sources import CountingSource

    from streamcli import StreamLoader

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.GRU(2, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        seen: list[list[int]] = []
        batches = 0
        with StreamLoader(CountingSource(LENGTHS), 2, 4, seed=1) as loader:  # no rank arguments: from the group
            n = len(loader)
            h = torch.zeros(1, 2, 4)
            for batch in loader:
                x = batch["x"].float()
                h = h * (~batch.reset).float()[None, :, None]  # reset rows that begin a stream
                y, h = model(x, h.detach())
                loss = (y * batch.valid[..., None]).pow(2).mean()
                opt.zero_grad()
                loss.backward()  # all-reduce: hangs if one rank had a batch more than the other
                opt.step()
                ok = batch.valid & ~batch.replayed
                seen += [[int(s), int(p)] for s, p in zip(batch.stream[ok], batch.position[ok], strict=True)]
                batches += 1
        Path(out_dir, f"rank{rank}.json").write_text(
            json.dumps({"len": n, "batches": batches, "rank": loader.rank, "seen": seen})
        )
    finally:
        dist.barrier()
        dist.destroy_process_group()
    # torch's teardown at interpreter exit sometimes aborts a gloo rank ("terminate called without an active
    # exception", also before streamcli ran any worker here): the rank's work is done and written, so leave now.
    os._exit(0)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_ranks_train_a_gru_under_ddp(tmp_path: Path) -> None:
    import torch.multiprocessing as tmp

    tmp.spawn(_rank_main, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in results] == [0, 1]
    assert results[0]["batches"] == results[1]["batches"] == results[0]["len"] == results[1]["len"] > 0
    steps = [tuple(s) for r in results for s in r["seen"]]
    assert len(steps) == len(set(steps)), "a step reached both ranks"
    assert set(steps) == {(s, p) for s, n in enumerate(LENGTHS) for p in range(n)}
    streams = [{s for s, _ in r["seen"]} for r in results]
    assert not streams[0] & streams[1], "a stream was split between the ranks"


# ------------------------------------------------------------------------------------ resumed on another world size

B_PER_RANK, T, CUT = {1: 4, 2: 2, 4: 2}, 4, 2  # 2 ranks of 2 rows cut; resumed on 1 rank of 4 (same global batch)
# and on 4 ranks of 2 (another: the rest of the epoch is re-planned)


def _resize_main(rank: int, world_size: int, port: int, out_dir: str, load: str, stop: int) -> None:
    import torch
    import torch.distributed as dist
    from _sources import CountingSource

    from streamcli import StreamLoader

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        batches: list[dict[str, list[Any]]] = []
        with StreamLoader(CountingSource(LENGTHS), B_PER_RANK[world_size], T, seed=1) as loader:  # rank: the group's
            if load:
                loader.load_state_dict(json.loads(Path(load).read_text()))  # rank 0's state, on every rank
            for batch in loader:
                batches.append({k: v.tolist() for k, v in [("x", batch["x"]), *batch.flags().items()]})
                count = torch.tensor([1])
                dist.all_reduce(count)  # every rank has this batch, or this hangs
                assert int(count) == world_size
                if len(batches) == stop:
                    break
            state = loader.state_dict()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"batches": batches, "state": state}))
    finally:
        dist.barrier()
        dist.destroy_process_group()
    os._exit(0)  # (as ``_rank_main``)


def _resize_run(out: Path, world_size: int, load: Path | None = None, stop: int = -1) -> list[dict[str, Any]]:
    import torch.multiprocessing as tmp

    out.mkdir()
    args = (world_size, _free_port(), str(out), str(load or ""), stop)
    tmp.spawn(_resize_main, args=args, nprocs=world_size, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world_size)]


def _global(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The global batches: every rank's batch k side by side (rows of ``x`` and of every flag)."""
    out = []
    for k in range(len(ranks[0]["batches"])):
        parts = [r["batches"][k] for r in ranks]
        out.append({f: [row for p in parts for row in (p[f] if f == "reset" else zip(*p[f], strict=True))]
                    for f in parts[0]})  # fmt: skip
    return out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_ranks_resume_on_one_rank_exactly_and_on_four_exactly_once(tmp_path: Path) -> None:
    from _sources import CountingSource

    from streamcli import StreamLoader

    with StreamLoader(CountingSource(LENGTHS), 4, T, seed=1) as one:
        want = [{k: v.tolist() for k, v in [("x", b["x"]), *b.flags().items()]} for b in one]
    want_global = _global([{"batches": want}])
    cut = _resize_run(tmp_path / "two", 2, stop=CUT)
    assert _global(cut) == want_global[:CUT]  # the same global batch on 2 ranks as on 1
    state = tmp_path / "state.json"
    state.write_text(json.dumps(cut[0]["state"]))  # rank 0's alone, as a trainer saves it
    assert _global(_resize_run(tmp_path / "one", 1, state)) == want_global[CUT:]
    four = _global(_resize_run(tmp_path / "four", 4, state))
    seen: list[tuple[int, int]] = []
    for b in _global(cut) + four:
        for cells in zip(b["valid"], b["stream"], b["position"], b["replayed"], strict=True):  # one row's
            seen += [(s, p) for v, s, p, r in zip(*cells, strict=True) if v and not r]
    assert sorted(seen) == sorted((s, p) for s, n in enumerate(LENGTHS) for p in range(n)), "a step lost or twice"
    for row, (valid, first) in enumerate(zip(four[0]["valid"], four[0]["is_first"], strict=True)):
        if any(valid):
            assert first[valid.index(True)], f"row {row}'s first step after the resize is not is_first"
