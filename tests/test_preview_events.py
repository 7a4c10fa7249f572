"""Event windows in the preview: histogram, voxel grid and time surface as images; ``preview events DIR`` runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from streamcli_sources.events.simulate import DTYPE
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli.preview import dashboard, event_rgb, frame_from_batch
from streamcli.cli.preview.fields import OFF_ON

runner = CliRunner()
SGR_TRUE = re.compile(r"\x1b\[38;2;(\d+);(\d+);(\d+);48;2;(\d+);(\d+);(\d+)m▀")


def test_a_histogram_shows_on_in_red_and_off_in_blue_scaled_by_a_robust_max() -> None:
    h = np.zeros((2, 10, 20), np.float32)
    h[1, :5] = 1  # ON: 100 pixels with one event each
    h[0, 5:9] = 1  # OFF: 80 pixels
    h[1, 9, 19] = 1000  # one hot pixel: clipped, and it does not darken the rest
    img = event_rgb(h, "histogram")
    assert img is not None and img.shape == (10, 20, 3) and img.dtype == np.uint8
    assert img[0, 0].tolist() == OFF_ON[1].astype(np.uint8).tolist()  # full red: 1 is the robust max
    assert img[5, 0].tolist() == OFF_ON[0].astype(np.uint8).tolist()
    assert img[9, 19].tolist() == img[0, 0].tolist() and img[9, 0].tolist() == [0, 0, 0]


def test_a_voxel_grid_is_a_strip_of_its_bins_in_time_order_with_signs_as_polarities() -> None:
    v = np.zeros((3, 2, 2), np.float32)
    v[0, 0, 0], v[2, 1, 1] = 0.5, -0.5
    img = event_rgb(v, "voxel")
    assert img is not None and img.shape == (2, 3 * 2 + 2, 3)  # 3 bins, 2 separator columns
    assert img[0, 0].tolist() == OFF_ON[1].astype(np.uint8).tolist()  # bin 0, positive: ON red
    assert img[1, 7].tolist() == OFF_ON[0].astype(np.uint8).tolist()  # bin 2, negative: OFF blue
    assert (img[:, 2] == 96).all() and (img[:, 5] == 96).all()


def test_a_time_surface_is_gray_from_its_latest_polarity() -> None:
    ts = np.zeros((2, 2, 2), np.float32)
    ts[0, 0, 0], ts[1, 0, 0], ts[1, 1, 1] = 0.25, 1.0, 0.5
    img = event_rgb(ts, "time_surface")
    assert img is not None
    assert img[..., 0].tolist() == [[255, 0], [0, 127]] and (img[..., 0] == img[..., 2]).all()


def test_a_window_of_the_wrong_shape_is_not_an_image() -> None:
    assert event_rgb(np.zeros((3, 4, 4)), "histogram") is None
    assert event_rgb(np.zeros((10, 4)), "voxel") is None
    assert event_rgb(np.zeros((2, 4, 4)), "raw") is None


def test_an_events_hint_draws_the_window_as_an_image_in_the_grid() -> None:
    import torch

    from streamcli.batch import Batch

    h = torch.zeros((2, 1, 2, 6, 8))
    h[1, 0, 1, 2, 3] = 4.0  # the last step, ON at (x=3, y=2)
    ones = torch.ones((2, 1), dtype=torch.bool)
    b = Batch(
        data={"events": h}, is_first=ones, reset=torch.ones(1, dtype=torch.bool), valid=ones,
        stream=torch.zeros((2, 1), dtype=torch.int64), position=torch.arange(2).reshape(2, 1), replayed=~ones,
    )  # fmt: skip
    f = frame_from_batch(b, lambda i: "rec", lambda i: 2, {"events": "events:histogram"})
    assert f.rows[0].kinds["events"] == "image" and f.rows[0].step["events"].shape == (6, 8, 3)
    from rich.console import Console

    con = Console(width=60, height=40, record=True, color_system="truecolor", force_terminal=True)
    con.print(dashboard(f, None, width=60, height=40, color_system="truecolor"))
    red = tuple(OFF_ON[1].astype(int))
    assert any(
        tuple(map(int, m[:3])) == red or tuple(map(int, m[3:])) == red
        for m in SGR_TRUE.findall(con.export_text(styles=True))
    )


@pytest.mark.slow
@pytest.mark.parametrize("representation", ["histogram", "voxel", "time_surface", "raw"])
def test_preview_events_renders_a_folder_of_recordings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, representation: str
) -> None:
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    ev = np.zeros(400, DTYPE)
    rng = np.random.default_rng(0)
    ev["x"], ev["y"], ev["p"] = rng.integers(0, 32, 400), rng.integers(0, 24, 400), rng.integers(0, 2, 400)
    ev["t"] = np.sort(rng.integers(0, 200_000, 400))
    (tmp_path / "rec").mkdir()
    np.save(tmp_path / "rec" / "a.npy", ev)
    snap = tmp_path / "grid.png"
    args = ["preview", "events", str(tmp_path / "rec"), "-s", f"representation={representation}", "-s", "capacity=400",
            "-b", "1", "-t", "2", "-w", "0", "--batches", "1", "--snapshot", str(snap)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    drawn = "events 32x24" if representation in ("histogram", "time_surface") else "events 164x24"
    assert (drawn if representation != "raw" else "events int64[400, 4]") in result.output
    assert snap.stat().st_size > 0
