"""Real DistributedDataParallel jobs on CPU (gloo): two ranks train with equal batch counts on disjoint, complete
streams; a `torchrun` job of two ranks resumes on one (the same global batch) and on four (another).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _ddp_resize import LENGTHS  # (one list for both DDP tests)


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

T, CUT = 4, 2  # 2 ranks of 2 rows cut after 2 batches; resumed on 1 rank of 4 (the same global batch) and on 4 ranks
# of 2 (another: the rest of the epoch is re-planned); each run is a real ``torchrun`` job (``tests/_ddp_resize.py``)


def _resize_run(out: Path, world_size: int, load: Path | None = None, stop: int = -1) -> list[dict[str, Any]]:
    out.mkdir()
    script = Path(__file__).resolve().parent / "_ddp_resize.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world_size)]
    cmd += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "--max-restarts", "0"]
    cmd += [str(script), str(out), str(load or ""), str(stop)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, f"torchrun on {world_size}: {run.stderr[-3000:]}"
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
