"""The examples say what they are doing on a long run, stop when asked, and raise no warning of their own."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
TBPTT = ROOT / "examples" / "train_tbptt.py"
LIGHTNING = ROOT / "examples" / "lightning_tbptt.py"
PROGRESS = re.compile(r"^batch 1: \d+(\.\d+)? batches/s, loss \d+\.\d{3} nats/byte$", re.M)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_train_tbptt_prints_progress_and_stops_after_batches(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _load(TBPTT, "train_tbptt_progress").main(["--batches", "3", "--workers", "0", "--progress", "30"])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert PROGRESS.search(out), out  # the first batch reports at once, then every 30 s
    assert "3 batches, loss over the last 1:" in out


def test_train_tbptt_refuses_zero_batches() -> None:
    with pytest.raises(SystemExit) as info:
        _load(TBPTT, "train_tbptt_progress").main(["--batches", "0"])
    assert info.value.code == 2


@pytest.mark.slow
def test_train_tbptt_runs_as_a_script_with_a_worker(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(TBPTT), "--batches", "3", "--workers", "1"], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert PROGRESS.search(proc.stdout), proc.stdout


@pytest.mark.slow  # a real lightning.Trainer: seconds of start-up
def test_the_lightning_example_raises_no_warning_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lightning")
    import torch

    ex = _load(LIGHTNING, "lightning_tbptt_warnings")
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = ex.train(ex.parse(["--steps", "3"]))
    finally:
        torch.set_num_threads(threads)
    assert len(model.losses) == 3
    own = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if Path(w.filename) == LIGHTNING]
    assert not own, own  # e.g. float() of a loss that needs grad ("Converting a tensor with requires_grad=True")
