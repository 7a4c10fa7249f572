"""The training page's example (examples/train_tbptt.py) teaches what it claims, on the shipped text."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_tbptt", ROOT / "examples" / "train_tbptt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_tbptt"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_carried_state_learns_faster_than_a_state_reset_every_batch() -> None:
    import torch

    train = _example().train
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; one thread is as fast for a model this small
    try:
        final = {}
        for carry in (True, False):  # one seed here; benchmarks/learning.py measures the margin over several
            losses = train(batches=1000, batch_size=16, time_steps=16, hidden=64, carry=carry, num_workers=0, seed=0)
            final[carry] = sum(losses[-200:]) / 200
    finally:
        torch.set_num_threads(threads)
    # Between what carrying gains with the state run over all T steps and over x[:-1] (the old example's
    # mistake, which still gains a little this early), each far from it.
    assert final[True] < final[False] - 0.09, f"carried vs reset: {final} (train loss, nats/byte)"


def test_the_state_carried_into_a_batch_has_seen_every_step_of_the_one_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    calls: list[tuple[int, torch.Tensor | None, torch.Tensor]] = []
    example = _example()
    run_rnn = example.run_rnn

    def recording(rnn: torch.nn.GRU, x: torch.Tensor, is_first: torch.Tensor, valid: torch.Tensor, hx: Any) -> Any:
        out, h = run_rnn(rnn, x, is_first, valid, hx)
        calls.append((int(valid.any(1).sum()), None if hx is None else hx.detach().clone(), h.detach().clone()))
        return out, h

    monkeypatch.setattr(example, "run_rnn", recording)
    example.train(batches=6, batch_size=4, time_steps=16, hidden=8, segment=64, num_workers=0)
    assert [steps for steps, _, _ in calls] == [16] * 6  # the RNN runs over every step of every batch
    assert calls[0][1] is None  # zeros: no state saved yet
    kept = 0
    for (_, _, before), (_, carried, _) in itertools.pairwise(calls):
        assert carried is not None
        for row in range(4):  # each row's state is the one its previous batch ended with, or a reset
            same = torch.equal(carried[:, row], before[:, row])
            assert same or not carried[:, row].any()
            kept += same
    assert kept > 0


def test_docs_training_block_is_the_example_file() -> None:
    page = (ROOT / "docs" / "training.md").read_text()
    start = "def train("
    source = (ROOT / "examples" / "train_tbptt.py").read_text()
    body = source[source.index(start) : source.index("\ndef main(")].strip()
    assert body in page, "docs/training.md's example differs from examples/train_tbptt.py: copy train() over"
