"""What the preview's labels and lines say: each row's position in full, the paused grid in step with the counters,
the skipped files by name while the run goes on, and the colour notice only where colours are drawn."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from _shard_fakes import make_batch
from rich.console import Console

from streamcli.cli.cmd_preview import Pace, live_loop
from streamcli.cli.preview import RowView, cell_lines, contact_sheet, dashboard, frame_from_batch, text_summary
from streamcli.cli.preview.grid import CellLayout
from streamcli.stats import LoaderStats

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def stats(**kw: object) -> LoaderStats:
    base = dict(
        batches=120, steps=3840, bytes=12_000_000, elapsed_s=2.0, first_batch_s=0.4, waits_s=(0.001,),
        worker_busy=(0.5,), worker_steps=(2000,), ready_slots=3, num_slots=6, epoch=0, streams_done=7,
        streams_total=16, skipped=0, copies=0,
    )  # fmt: skip
    base.update(kw)
    return LoaderStats(**base)  # type: ignore[arg-type]


def row(name: str, position: int, length: int | None, step: dict[str, np.ndarray] | None = None) -> RowView:
    return RowView(row=0, name=name, position=position, length=length, valid=True, reset=False, step=step or {})


# ------------------------------------------------------------------------------------------------- labels


def test_a_narrow_cell_shortens_the_name_never_the_position_or_its_total() -> None:
    # An events file of 193 windows at window 32: cut at the cell's edge, the label used to read "32/1".
    r = row("tupi_example.raw", 31, 193)
    for width in (12, 14, 18, 22, 30):
        head = ANSI.sub("", cell_lines(r, CellLayout(width, 0), "256")[0])
        assert "32/193" in head, (width, head)
        assert len(head.rstrip()) <= width
    assert r.label() == " 0 tupi_example.raw 32/193"  # room enough: the whole name
    assert r.label(22) == " 0 tupi_e…e.raw 32/193"  # the start and the suffix stay


def test_a_clip_of_unknown_length_shows_its_position_in_a_narrow_cell() -> None:
    r = row("display-dual-monitors.webm", 11, None)
    for width in (12, 16, 24):
        head = ANSI.sub("", cell_lines(r, CellLayout(width, 0), "256")[0])
        assert head.rstrip().endswith(" 12"), (width, head)


def test_the_snapshot_labels_keep_the_position_too() -> None:
    frame = frame_from_batch(make_batch(0), lambda i: "a-very-long-clip-name-from-a-phone-camera.mp4", lambda i: 1234)
    assert contact_sheet(frame).shape[0] > 0  # draws; the label text is what label(width) gives
    assert frame.rows[0].label(26).endswith("/1234")


# ------------------------------------------------------------------------------------------------- pausing


class ScriptedKeys:
    """Keys pressed by the test: ``press`` queues one for the loop's next look."""

    enabled = True

    def __init__(self) -> None:
        self.queue: list[str] = []

    def press(self, key: str) -> None:
        self.queue.append(key)

    def get(self, timeout: float = 0.0) -> str | None:
        return self.queue.pop(0) if self.queue else None

    def wait(self, timeout: float) -> None:
        pass


def test_a_paused_grid_shows_the_batch_the_counters_count_up_to() -> None:
    """A fast loader between two draws: batches pulled but not copied out. Pausing then must not freeze a grid
    hundreds of batches behind the "batches" counter on the same screen."""
    keys, now = ScriptedKeys(), [0.0]

    def clock() -> float:
        now[0] += 1e-4  # a batch every 0.1 ms of this clock: 500 batches come between two draws at 20 Hz
        return now[0]

    pace = Pace(0.05, clock)
    state = {"pulled": 0, "framed": 0}
    shown: list[tuple[bool, int, int]] = []  # (paused, batch in the grid, batches counted)

    def pull(show: bool) -> bool:
        state["pulled"] += 1
        if show or state["framed"] == 0 or pace.due():
            state["framed"] = state["pulled"]
        if state["pulled"] == 777:
            keys.press(" ")
        return True

    def render(paused: bool, done: bool) -> None:
        shown.append((paused, state["framed"], state["pulled"]))
        if paused and sum(p for p, _, _ in shown) == 3:
            keys.press("n")  # one batch on, still paused
        if paused and sum(p for p, _, _ in shown) >= 5:
            keys.press("q")

    live_loop(keys, pull, render, pace, done=False, stop_when_done=False)
    paused = [(grid, counted) for p, grid, counted in shown if p]
    assert paused, shown
    assert all(grid == counted for grid, counted in paused), paused
    assert len({counted for _, counted in paused}) == 2  # "n" stepped once; nothing else moved while paused


# ------------------------------------------------------------------------------------------------- skipped names


def test_skipped_files_are_named_while_the_run_goes_on() -> None:
    con = Console(width=100, height=40, record=True)
    names = ["broken.mp4", "audio-only.webm", "not-a-video.mp4"]
    con.print(dashboard(None, stats(skipped=1), width=100, height=40, color_system="256", skipped=2,
                        skipped_names=names))  # fmt: skip
    text = con.export_text()
    assert "broken.mp4, audio-only.webm, not-a-video.mp4" in text
    narrow = Console(width=50, height=40, record=True)
    narrow.print(dashboard(None, stats(), width=50, height=40, color_system="256", skipped_names=names * 4))
    assert "more" in narrow.export_text()  # as many as fit, then how many more
    piped = Console(width=100, record=True)
    piped.print(text_summary(None, stats(), skipped_names=names))
    assert "audio-only.webm" in piped.export_text()


# ------------------------------------------------------------------------------------------------- colour notice

NOTICE = "tmux: the terminal reports 256 colours, so images use the 256-colour palette"


def _text_frame() -> Callable[[], object]:
    import torch

    from streamcli.batch import Batch

    text = np.frombuffer(b"hello world, bye", np.uint8).reshape(4, 1, 4).copy()
    ones = torch.ones((4, 1), dtype=torch.bool)
    b = Batch(
        data={"text": torch.from_numpy(text)}, is_first=ones, reset=torch.ones(1, dtype=torch.bool), valid=ones,
        stream=torch.zeros((4, 1), dtype=torch.int64), position=torch.arange(4).reshape(4, 1), replayed=~ones,
    )  # fmt: skip
    return lambda: frame_from_batch(b, lambda i: "book.txt", lambda i: 4)


def test_the_colour_notice_shows_only_where_images_are_drawn() -> None:
    def screen(frame: object) -> str:
        con = Console(width=120, height=60, record=True)
        con.print(dashboard(frame, stats(), width=120, height=60, color_system="256", notice=NOTICE))  # type: ignore[arg-type]
        return con.export_text()

    assert NOTICE not in screen(_text_frame()())  # text looks the same in any palette
    assert NOTICE not in screen(None)  # nothing drawn yet
    assert screen(frame_from_batch(make_batch(0), lambda i: "clip")).count(NOTICE) == 1
