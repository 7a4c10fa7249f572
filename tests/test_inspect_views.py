"""The inspect app's views without a terminal: each field kind of the detail pane, the help screen's keys, and the
app over a source of unknown lengths (going to a batch replays, and the status line says so)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import torch
from _sources import CountingSource
from rich.console import Console

from streamcli import StreamLoader
from streamcli.batch import Batch
from streamcli.cli.inspect import InspectApp
from streamcli.cli.inspect.detail import detail
from streamcli.cli.inspect.help import KEYS
from streamcli.inspection import LoaderBatches


def text_of(renderable: Any) -> str:
    console = Console(width=100, record=True, color_system="truecolor")
    console.print(renderable)
    return console.export_text()


def batch_of(data: dict[str, np.ndarray], T: int = 4, B: int = 2) -> Batch:
    valid = torch.ones(T, B, dtype=torch.bool)
    valid[2:, 1] = False
    return Batch(
        data={k: torch.from_numpy(v) for k, v in data.items()},
        is_first=torch.zeros(T, B, dtype=torch.bool),
        reset=torch.zeros(B, dtype=torch.bool),
        valid=valid,
        stream=torch.zeros(T, B, dtype=torch.int64),
        position=torch.arange(T).repeat(B, 1).T.contiguous(),
        replayed=torch.zeros(T, B, dtype=torch.bool),
    )


class Words:
    """A tokenizer: ids to words."""

    def decode(self, ids: list[int]) -> str:
        return " ".join(["zero", "one", "two", "three"][i] for i in ids)


def test_the_detail_pane_shows_each_kind_of_field_by_its_kind() -> None:
    rng = np.random.default_rng(0)
    batch = batch_of(
        {
            "frame": rng.integers(0, 255, (4, 2, 3, 8, 8), dtype=np.uint8),
            "text": np.frombuffer(b"abcdefghijklmnop", np.uint8).reshape(4, 1, 4).repeat(2, 1).copy(),
            "audio": (np.sin(np.linspace(0, 20, 4 * 2 * 64)) * 20000).astype(np.int16).reshape(4, 2, 64),
            "tokens": np.array([[0, 1], [1, 2], [2, 3], [3, 0]], np.int64),
            "score": np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2),
        }
    )
    displays = {"tokens": "other"}
    shown = text_of(detail(batch, 0, displays, Words()))
    assert "frame image  uint8[3, 8, 8] x 4 steps" in shown and "▀" in shown  # a half-block thumbnail
    assert "abcdefghijklmnop" in shown  # text bytes as text
    assert "audio audio" in shown and any(c in shown for c in "▁▂▃▄▅▆▇█")  # a waveform sparkline
    assert "zero one two three" in shown and "ids 0 1 2 3" in shown  # token ids through the tokenizer
    assert "score other  float32[] x 4 steps" in shown and "min -1 mean -0.1429 max 0.7143" in shown
    short = text_of(detail(batch, 1, displays, None))  # row 1: 2 valid steps; no tokenizer: numbers
    assert "fields over its 2 valid steps" in short and "int64[2] min 1 mean 1.5 max 2" in short


def test_the_help_names_every_key_the_app_binds() -> None:
    keys = " ".join(k for k, _ in KEYS)
    for key in ("?", "n", "→", "p", "←", "g K Enter", "↑", "↓", "f", "q"):
        assert key in keys
    bound = {b.key for b in InspectApp.BINDINGS}  # type: ignore[union-attr]
    assert {"question_mark", "n,right", "p,left", "g", "f", "q"} <= bound


def test_without_lengths_g_k_replays_to_the_kth_batch_and_the_status_line_says_so() -> None:
    lengths = [30, 25, 40, 12]
    with StreamLoader(CountingSource(lengths), 2, 5, seed=1) as plain:
        want = [b.clone() for b in plain][:12]
    with StreamLoader(CountingSource(lengths, report_length=False), 2, 5, seed=1) as loader:
        batches = LoaderBatches(loader)
        app = InspectApp(batches)
        seen: dict[str, Any] = {}

        async def main() -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                for keys in (("g", "1", "1", "enter"), ("p",)):
                    await pilot.press(*keys)
                    for _ in range(3):
                        await pilot.pause()
                        await app.workers.wait_for_complete()
                    seen[keys[-1]] = (app.k, app.batch, app.status_line)
                await pilot.press("g", "3", "escape")  # escape cancels: the box closes, the batch stays
                await pilot.pause()
                seen["escape"] = (app.k, app.query_one("#goto").has_class("open"))

        asyncio.run(main())
    k, batch, status = seen["enter"]
    assert k == 11 and batch is not None and torch.equal(batch["x"], want[11]["x"])
    assert "lengths unknown: going back replays" in status
    k, batch, _ = seen["p"]
    assert k == 10 and batch is not None and torch.equal(batch["x"], want[10]["x"])
    assert seen["escape"] == (10, False)


def test_the_detail_pane_shows_a_series_as_a_sparkline_per_dimension() -> None:
    state = np.zeros((4, 2, 3), np.float32)
    state[:, 0, 0] = [0, 1, 2, 3]  # rising
    state[:, 0, 1] = [3, 2, 1, 0]  # falling
    state[:, 0, 2] = 5  # flat
    shown = text_of(detail(batch_of({"observation.state": state}), 0, {"observation.state": "series"}))
    assert "observation.state series  float32[3] x 4 steps" in shown
    assert "state[0] ▁▃▆█ 3" in shown and "state[1] █▆▃▁ 0" in shown and "state[2] ▁▁▁▁ 5" in shown
