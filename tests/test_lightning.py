"""A real ``lightning.Trainer`` checkpoints mid-epoch and resumes, in a new process, onto the same batches.

Why it works: Lightning's fit loop saves every training loader that has ``state_dict``/``load_state_dict``
(``lightning.fabric.utilities.types._Stateful``). ``FitLoop.on_save_checkpoint`` puts
``CombinedLoader._state_dicts()`` under ``checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]``, and on
``trainer.fit(..., ckpt_path=...)`` ``FitLoop.setup_data`` calls ``load_state_dict`` with it after its check
``iter(loader)`` and before the ``iter()`` that trains, so the next epoch resumes at the saved batch. The test
reads that entry of the checkpoint to prove it is this path, not luck.

Two things hold it up: the loader has ``len()`` (without it Lightning's ``_PrefetchDataFetcher`` reads one batch
ahead, the saved position is one batch late and the resume skips a batch: pinned below as an expected failure),
and nothing here depends on which epoch number Lightning's check
``iter(loader)`` gives the first batch: the runs are compared with each other, batch hash for batch hash.

Under DDP, Lightning writes the checkpoint on rank 0 alone, so it holds rank 0's loader state only; every rank
loads it, and ``StreamLoader.load_state_dict`` turns it into the rank's own position at the same batch, from the
streams' lengths.

Each run is ``python tests/_lightning_run.py`` in a process of its own (a fork of one that imported Lightning and
did nothing else: tests/_forkrun.py), so no Lightning state leaks from one to the next.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _forkrun import ForkRunner

if importlib.util.find_spec("lightning") is None:  # not imported here: collecting the fast tests never pays for it
    pytest.skip("needs lightning (pip install lightning)", allow_module_level=True)

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "text"
EVERY = 5  # checkpoint every 5 steps; a run that crashed after step 5 resumes from step=5.ckpt

# One pytest-xdist worker (make test: --dist loadgroup) makes the module's fixtures once: the reference runs and
# the fork server that has imported Lightning.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.xdist_group("lightning")]

Seen = list[list[dict[str, Any]]]  # per rank, one record per training step


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}  # a tiny model on a shared machine: threads only spin


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkRunner]:
    """Each run is a process of its own, forked from one that has imported Lightning (and nothing else happened in
    it): the runs share no Lightning state, and do not each pay for the import. DDP's extra rank is started afresh
    by Lightning itself."""
    runner = ForkRunner(preload=("torch", "lightning", "streamcli_sources.text"), env=_env())
    yield runner
    runner.close()


def _run(forks: ForkRunner, out: Path, *args: str, devices: int = 1) -> Seen:
    out.mkdir(parents=True)
    cmd = ("--data", str(DATA), "--out", str(out), *args, "--devices", str(devices))
    proc = forks.run(HERE / "_lightning_run.py", Path.cwd(), _env(), timeout=240, args=cmd)
    assert proc.returncode == 0, f"_lightning_run.py {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(devices)]


def _hashes(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(r["step"], r["hash"]) for r in records]


def _loader_states(ckpt: Path) -> list[dict[str, Any]]:
    import torch

    checkpoint = torch.load(ckpt, weights_only=False)
    states: list[dict[str, Any]] = checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    return states


def _check_reference(seen: list[dict[str, Any]]) -> None:
    """The uninterrupted run spans two Lightning epochs, so the resume crosses an epoch boundary, and the cut at
    EVERY is mid-epoch."""
    epochs = [r["trainer_epoch"] for r in seen]
    assert epochs[EVERY] == epochs[EVERY - 1] == epochs[EVERY + 1] == 0 and epochs[-1] == 1, epochs
    # batch.epoch follows Lightning's epochs one for one. Its offset is 1 while iter() starts an epoch (Lightning's
    # check iter() takes epoch 0) and 0 once an epoch starts at the first next(): either passes here.
    offsets = {r["batch_epoch"] - r["trainer_epoch"] for r in seen}
    assert len(offsets) == 1 and offsets <= {0, 1}, offsets
    # Two batches of padding alone are alike (a rank with fewer steps pads to the others' count): skip them.
    real = [r["hash"] for r in seen if r["real"]]
    assert len(set(real)) == len(real), "two steps saw the same batch"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, forks: ForkRunner) -> tuple[list[dict[str, Any]], Path]:
    """The uninterrupted run (in-process loader), and its checkpoint at step EVERY: what a run that crashed after
    that step left behind, as the checkpoint is written before anything later happens."""
    root = tmp_path_factory.mktemp("lightning")
    (seen,) = _run(forks, root / "reference", "--every", str(EVERY))
    _check_reference(seen)
    return seen, root / "reference" / f"step={EVERY}.ckpt"


@pytest.mark.parametrize("workers", [0, 2])
def test_a_trainer_resumed_from_a_mid_epoch_checkpoint_trains_on_the_batches_of_the_uninterrupted_run(
    tmp_path: Path, reference: tuple[list[dict[str, Any]], Path], workers: int, forks: ForkRunner
) -> None:
    seen, ckpt = reference
    (state,) = _loader_states(ckpt)  # Lightning saved the loader itself, at the checkpoint's step
    assert (state["epoch"], state["batch"]) == (seen[EVERY]["batch_epoch"], EVERY)
    (tail,) = _run(forks, tmp_path / "resumed", "--workers", str(workers), "--resume", str(ckpt))
    assert _hashes(tail) == _hashes(seen[EVERY:])
    assert [r["batch_epoch"] for r in tail] == [r["batch_epoch"] for r in seen[EVERY:]]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="without len(loader) Lightning's fetcher reads one batch ahead, so the loader's saved position is one "
    "batch past the checkpoint's step, and the resume skips that batch",
)
def test_a_trainer_resumed_over_a_loader_of_unknown_length_trains_on_the_batches_of_the_uninterrupted_run(
    tmp_path: Path, forks: ForkRunner
) -> None:
    w = ("--unknown-lengths", "--epochs", "1")
    (reference,) = _run(forks, tmp_path / "reference", *w, "--every", str(EVERY))
    assert len(reference) > EVERY + 1
    ckpt = tmp_path / "reference" / f"step={EVERY}.ckpt"
    (state,) = _loader_states(ckpt)
    assert state["batch"] == EVERY, f"the checkpoint at step {EVERY} holds the loader's position {state['batch']}"
    (tail,) = _run(forks, tmp_path / "resumed", *w, "--resume", str(ckpt))
    assert _hashes(tail) == _hashes(reference[EVERY:])


# ------------------------------------------------------------------------------------------------------------ DDP


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory, forks: ForkRunner) -> tuple[Seen, Path]:
    """The uninterrupted 2-rank run (in-process loaders) and its checkpoint at step EVERY, which Lightning wrote on
    rank 0."""
    root = tmp_path_factory.mktemp("lightning_ddp")
    reference = _run(forks, root / "reference", "--every", str(EVERY), devices=2)
    for seen in reference:
        _check_reference(seen)
    assert len(reference[0]) == len(reference[1]), "the ranks trained for different numbers of steps"
    real = [{r["hash"] for r in seen if r["real"]} for seen in reference]
    assert not real[0] & real[1], "both ranks saw one batch"
    return reference, root / "reference" / f"step={EVERY}.ckpt"


def test_two_ddp_ranks_resume_each_on_their_own_batches_from_rank_0s_checkpoint(
    tmp_path: Path, ddp: tuple[Seen, Path], forks: ForkRunner
) -> None:
    reference, ckpt = ddp
    (state,) = _loader_states(ckpt)
    assert state["fingerprint"]["rank"] == 0  # what Lightning saved: rank 0's state alone
    tail = _run(
        forks, tmp_path / "resumed", "--workers", "2", "--resume", str(ckpt), devices=2
    )  # workers on both ranks
    for rank in range(2):
        assert _hashes(tail[rank]) == _hashes(reference[rank][EVERY:]), f"rank {rank}"


def test_a_two_device_checkpoint_resumes_on_one_device_with_the_same_global_batch(
    tmp_path: Path, ddp: tuple[Seen, Path], forks: ForkRunner
) -> None:
    """Preempted on 2 devices, resumed on 1 with twice the rows: the global batches of the uninterrupted run."""
    reference, ckpt = ddp
    (tail,) = _run(forks, tmp_path / "resumed", "--resume", str(ckpt), "--batch-size", "8")
    want = [r0["rows"] + r1["rows"] for r0, r1 in zip(reference[0][EVERY:], reference[1][EVERY:], strict=True)]
    assert [r["rows"] for r in tail] == want
    assert [r["step"] for r in tail] == [r["step"] for r in reference[0][EVERY:]]


# ------------------------------------------------------------------------------------ examples/lightning_tbptt.py

EXAMPLE = HERE.parent / "examples" / "lightning_tbptt.py"


@pytest.fixture
def torch_threads() -> Iterator[None]:
    """The example sets torch's thread count for its process; put it back for the tests after."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _example() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("lightning_tbptt", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tbptt_example_runs_as_a_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forks: ForkRunner
) -> None:
    with pytest.raises(SystemExit) as help_exit:
        _example().parse(["--help"])
    assert help_exit.value.code == 0 and "--no-carry" in capsys.readouterr().out
    proc = forks.run(EXAMPLE, tmp_path, dict(os.environ), timeout=120, args=("--steps", "3", "--workers", "1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mean loss over the last 3 steps" in proc.stdout


def test_the_tbptt_example_resumes_with_its_hidden_state_onto_the_uninterrupted_losses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_threads: None
) -> None:
    """Lightning restores the loader and the optimiser; the example adds the GRU state to the checkpoint, so the
    losses after the resume are those of the run that never stopped, bit for bit."""
    ex = _example()
    monkeypatch.chdir(tmp_path)
    whole = ex.train(ex.parse(["--steps", "12", "--save-every", "6"])).losses
    (ckpt,) = (tmp_path / "checkpoints").glob("*step=6.ckpt")
    tail = ex.train(ex.parse(["--steps", "12", "--ckpt-path", str(ckpt)])).losses
    assert tail == whole[6:]
