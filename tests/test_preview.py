"""Preview renderables: half-block conversion, cells, the dashboard in a capture console, the snapshot."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from _shard_fakes import make_batch
from rich.console import Console

from streamcli.cli.preview import (
    as_rgb,
    contact_sheet,
    dashboard,
    field_kind,
    field_kinds,
    frame_from_batch,
    half_block_lines,
    resize_nearest,
    snapshot_png,
    text_summary,
)
from streamcli.stats import LoaderStats

SGR_TRUE = re.compile(r"\x1b\[38;2;(\d+);(\d+);(\d+);48;2;(\d+);(\d+);(\d+)m▀")


def stats(**kw: object) -> LoaderStats:
    base = dict(
        batches=120, steps=3840, bytes=12_000_000, elapsed_s=2.0, first_batch_s=0.4, waits_s=(0.001, 0.002, 0.010),
        worker_busy=(0.97, 0.5), worker_steps=(2000, 1840), ready_slots=3, num_slots=6, epoch=1,
        streams_done=7, streams_total=16, skipped=2, copies=0,
    )  # fmt: skip
    base.update(kw)
    return LoaderStats(**base)  # type: ignore[arg-type]


def capture(width: int = 140, color: str | None = None) -> Console:
    return Console(width=width, height=60, record=True, color_system=color, force_terminal=color is not None)


def test_half_block_lines_carry_both_pixels_in_24_bit() -> None:
    img = np.zeros((4, 2, 3), np.uint8)
    img[0, 0] = (255, 0, 7)  # upper pixel of line 0, column 0
    img[1, 0] = (1, 2, 3)  # lower pixel
    lines = half_block_lines(img, "truecolor")
    assert len(lines) == 2
    cells = [tuple(map(int, m)) for m in SGR_TRUE.findall(lines[0])]
    assert cells[0] == (255, 0, 7, 1, 2, 3) and cells[1] == (0,) * 6
    assert lines[0].endswith("\x1b[0m")


def test_half_block_pads_odd_heights_and_maps_256_colours() -> None:
    img = np.full((3, 5, 3), 255, np.uint8)
    lines = half_block_lines(img, "256")
    assert len(lines) == 2
    assert lines[0].count("\x1b[38;5;231;48;5;231m▀") == 5  # white in the xterm cube
    assert "\x1b[38;5;231;48;5;016m▀" in lines[1]  # the padded row is black


def test_half_block_is_fast_enough_for_a_live_grid() -> None:
    img = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    half_block_lines(img)
    # This thread's CPU time, the best of 5: a busy machine that preempts the test does not count.
    cpu = []
    for _ in range(5):
        t = time.thread_time()
        half_block_lines(img)
        cpu.append(time.thread_time() - t)
    assert min(cpu) < 0.03, cpu  # ~2 ms here; one Rich Style per cell costs ~120 ms


@pytest.mark.parametrize(
    ("shape", "hwc"),
    [((8, 10, 3), (8, 10, 3)), ((3, 8, 10), (8, 10, 3)), ((1, 8, 10), (8, 10, 3)), ((8, 10, 1), (8, 10, 3))],
)
def test_as_rgb_accepts_hwc_and_chw(shape: tuple[int, ...], hwc: tuple[int, ...]) -> None:
    arr = np.arange(np.prod(shape), dtype=np.uint8).reshape(shape)
    out = as_rgb(arr)
    assert out is not None and out.shape == hwc
    if shape[0] == 3:
        assert np.array_equal(out[..., 1], arr[1])


def test_field_kinds_are_inferred_without_a_hint() -> None:
    assert field_kind(np.zeros(16, np.uint8)) == "text"
    assert field_kind(np.zeros((3, 32, 32), np.uint8)) == "image"
    assert field_kind(np.zeros((800, 2), np.int16)) == "audio"
    assert field_kind(np.zeros(32, np.float32)) == "audio"
    assert field_kind(np.eye(3)) == "other"
    assert field_kind(np.float64(3.0)) == "other"


def test_display_hints_win_over_inference() -> None:
    assert field_kind(np.zeros(16, np.uint8), "other") == "other"
    assert field_kind(np.zeros(32, np.float32), "text") == "text"
    assert field_kind(np.zeros(5, np.float32), "audio") == "audio"
    assert field_kind(np.eye(3), "image") == "other"  # a hint that cannot be drawn falls back
    kinds = field_kinds({"body": np.zeros(8, np.uint8), "n": np.int32(3)}, {"body": "text:n"})
    assert kinds == {"body": "text", "n": "hidden"}


def test_field_display_is_validated() -> None:
    from streamcli.source import Field

    f = Field("body", (8,), "uint8", display="text:n")
    assert f.display_kind == "text" and f.length_field == "n"
    assert Field("x", (), "int32").display == "" and Field("x", (), "int32").length_field is None
    for bad in ("picture", "image:n", "text:", "text:1x"):
        with pytest.raises(ValueError, match="display="):
            Field("x", (8,), "uint8", display=bad)


def test_builtin_sources_declare_display_hints() -> None:
    from streamcli.plugins import load_source

    cam = {f.name: f.display for f in load_source("camera", 1, size=(8, 8)).fields()}
    assert cam == {"frame": "image", "homography": "other"}
    text = {f.name: f.display for f in load_source("text", ["ab"], strings=True).fields()}
    assert text == {"text": "text:nbytes", "nbytes": ""}


def test_a_third_party_field_renders_by_its_hint() -> None:
    """Names preview has never heard of: 'caption' (text with a length field) and 'depth' (other)."""
    import torch

    from streamcli.batch import Batch

    cap = np.zeros((2, 1, 8), np.uint8)
    cap[0, 0, :5], cap[1, 0, :3] = list(b"hello"), list(b" yo")
    ones = torch.ones((2, 1), dtype=torch.bool)
    b = Batch(
        data={"caption": torch.from_numpy(cap), "clen": torch.tensor([[5], [3]], dtype=torch.int32),
              "depth": torch.zeros((2, 1, 4), dtype=torch.uint8)},
        is_first=ones, reset=torch.ones(1, dtype=torch.bool), valid=ones, stream=torch.zeros((2, 1), dtype=torch.int64),
        position=torch.arange(2).reshape(2, 1), replayed=~ones,
    )  # fmt: skip
    f = frame_from_batch(b, lambda i: "s", lambda i: 2, {"caption": "text:clen", "depth": "other"})
    assert f.rows[0].text == {"caption": b"hello yo"} and f.rows[0].kinds["clen"] == "hidden"
    con = capture(width=100)
    con.print(text_summary(f, None))
    out = con.export_text()
    assert "'hello yo'" in out and "clen" not in out and "depth uint8[4]" in out


def test_resize_nearest() -> None:
    img = np.arange(16, dtype=np.uint8).reshape(4, 4, 1)
    assert resize_nearest(img, 2, 2)[..., 0].tolist() == [[0, 2], [8, 10]]


def test_frame_labels_reset_and_padding() -> None:
    b = make_batch(1)  # row 2's last step is padding in odd batches
    b.reset[:] = False
    b.reset[0] = True
    f = frame_from_batch(b, lambda i: f"clip{i}", lambda i: 50)
    assert len(f.rows) == 3 and f.rows[0].reset
    r = f.rows[1]
    assert r.valid and r.label().startswith(" 1 clip") and r.label().endswith("/50")
    assert f.rows[2].step["frame"].shape == (4, 6, 3)


def test_dashboard_renders_grid_and_stats() -> None:
    con = capture(color="truecolor")
    frame = frame_from_batch(make_batch(0), lambda i: f"clip{i}")
    con.print(dashboard(frame, stats(), width=140, height=60, color_system="truecolor", title="video clips/"))
    out = con.export_text(styles=True)
    assert SGR_TRUE.search(out)  # the image cells
    text = re.sub(r"\x1b\[[0-9;]*m", "", out)
    for needle in ("batches/s", "steps/s", "MB/s", "p50", "p95", "max", "worker 0", "worker 1", "97%",
                   "ready slots", "3/6", "7/16 done", "epoch 1", "skipped/failed 2", "clip", "q quit"):  # fmt: skip
        assert needle in text, needle


def test_notice_and_pause_are_shown() -> None:
    con = capture()
    frame = frame_from_batch(make_batch(0), lambda i: f"clip{i}")  # images: the colour notice matters
    con.print(dashboard(frame, stats(), width=100, height=40, color_system="256", paused=True, notice="256 colours"))
    text = con.export_text()
    assert "PAUSED" in text and "256 colours" in text


def test_text_rows_show_their_text() -> None:
    import torch

    from streamcli.batch import Batch

    text = np.frombuffer(b"hello world, bye", np.uint8).reshape(4, 1, 4).copy()  # T=4, B=1, width 4
    ones = torch.ones((4, 1), dtype=torch.bool)
    b = Batch(
        data={"text": torch.from_numpy(text), "nbytes": torch.full((4, 1), 4, dtype=torch.int32)},
        is_first=ones, reset=torch.ones(1, dtype=torch.bool), valid=ones, stream=torch.zeros((4, 1), dtype=torch.int64),
        position=torch.arange(4).reshape(4, 1), replayed=~ones,
    )  # fmt: skip
    f = frame_from_batch(b, lambda i: "book.txt", lambda i: 4)
    con = capture(width=80)
    con.print(text_summary(f, stats()))
    out = con.export_text()
    assert "hello world, bye" in out and "book.txt 4/4" in out
    con = capture(width=80, color="truecolor")
    con.print(dashboard(f, None, width=80, height=30, color_system="truecolor"))
    assert "hello world, bye" in re.sub(r"\x1b\[[0-9;]*m", "", con.export_text(styles=True))


def test_snapshot_png(tmp_path: Path) -> None:
    import cv2

    frame = frame_from_batch(make_batch(0), lambda i: f"clip{i}", lambda i: 9)
    sheet = contact_sheet(frame)
    assert sheet.ndim == 3 and sheet.shape[2] == 3
    snapshot_png(frame, tmp_path / "grid.png")
    img = cv2.imread(str(tmp_path / "grid.png"))
    assert img is not None and img.shape == sheet.shape
