"""Two ranks of a real DistributedDataParallel job on CPU (gloo): equal batch counts, disjoint and complete streams."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

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
