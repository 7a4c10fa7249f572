"""One rank of the resize test (``tests/test_ddp.py``), as ``torchrun`` starts it: rank, world size and the rendezvous
come from the environment. Usage: ``torchrun --nproc-per-node N tests/_ddp_resize.py OUT_DIR [STATE] [STOP]``.

Each rank writes ``OUT_DIR/rank{r}.json``: its batches (``x`` and every flag) and its state at the end."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

B_PER_RANK, T = {1: 4, 2: 2, 4: 2}, 4  # 2 ranks of 2 rows; 1 rank of 4 (the same global batch); 4 of 2 (another)
LENGTHS = [23, 5, 0, 31, 12, 18, 9, 27, 3, 14, 20]


def main(out_dir: str, load: str, stop: int) -> None:
    import torch
    import torch.distributed as dist
    from _sources import CountingSource

    from streamcli import StreamLoader

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: torchrun's
    rank, world_size = dist.get_rank(), dist.get_world_size()
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


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the tests' own helpers (``_sources``)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "", int(sys.argv[3]) if len(sys.argv) > 3 else -1)
