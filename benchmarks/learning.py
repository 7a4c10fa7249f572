"""The examples' claim, over several seeds: carrying the hidden state learns faster than resetting it every batch.

    python benchmarks/learning.py                 # both examples, seeds 0 1 2 (about 3 minutes on 2 cores)
    python benchmarks/learning.py --seeds 0 --only plain
    python benchmarks/learning.py --only tokens   # examples/train_tokens.py (about 2 minutes on 2 cores)

``examples/train_tbptt.py`` (plain PyTorch: B=16, T=16, hidden 64, 1000 batches) and
``examples/lightning_tbptt.py`` (Lightning, its defaults: 800 steps) each train twice per seed on the two texts
in ``tests/data/text``, the same batches both times, once carrying the state and once resetting it every batch.
``examples/train_tokens.py`` (a GRU on a nanoGPT-style token file of those texts' paragraphs, bytes as ids: B=16,
T=16, hidden 64, 600 batches) the same way. The figure is the mean training loss over the last 200 (plain), 100
(Lightning) or 150 (tokens) batches, in nats per byte (a token is a byte there too), and the margin is reset minus
carried. The suite checks one seed of the plain example
(``tests/test_training_example.py``); this script is the evidence for the margins recorded in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # spawned workers (none here: num_workers=0) would import it by this name
    spec.loader.exec_module(module)
    return module


def plain(seed: int, carry: bool) -> float:
    losses = _load("train_tbptt").train(
        batches=1000, batch_size=16, time_steps=16, hidden=64, carry=carry, num_workers=0, seed=seed
    )
    return float(sum(losses[-200:]) / 200)


def lightning(seed: int, carry: bool) -> float:
    ex = _load("lightning_tbptt")
    model = ex.train(ex.parse(["--seed", str(seed), "--workers", "0"] + ([] if carry else ["--no-carry"])))
    return float(sum(model.losses[-100:]) / 100)


def tokens(seed: int, carry: bool) -> float:
    import tempfile

    ex = _load("train_tokens")
    with tempfile.TemporaryDirectory(prefix="learning_tokens_") as tmp:
        path = ex.write_byte_corpus(Path(tmp) / "train.bin")
        losses = ex.train(path, steps=600, batch_size=16, time_steps=16, hidden=64, carry=carry, num_workers=0,
                          seed=seed)  # fmt: skip
    return float(sum(losses[-150:]) / 150)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--only", choices=["plain", "lightning", "tokens"], default=None)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)  # a model this small gains nothing from more on a shared host
    runs = {"plain": plain, "lightning": lightning, "tokens": tokens}
    print("| example | seed | carried | reset every batch | margin |")
    print("|---|---|---|---|---|")
    for name, run in runs.items():
        if args.only not in (None, name):
            continue
        for seed in args.seeds:
            carried, reset = run(seed, True), run(seed, False)
            print(f"| {name} | {seed} | {carried:.3f} | {reset:.3f} | {reset - carried:.3f} |", flush=True)


if __name__ == "__main__":
    main()
