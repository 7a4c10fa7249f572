"""``bench`` says how long it has left, and ``--quick`` gives a first look in seconds."""

from __future__ import annotations

import io

from conftest import data_root
from rich.console import Console
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli.cmd_bench import RunProgress, time_left

runner = CliRunner()


def test_the_time_left_is_the_mean_run_so_far_times_the_runs_to_go() -> None:
    assert time_left(2, 6, 20.0) == "about 40 s left"
    assert time_left(1, 10, 30.0) == "about 4 min 30 s left"
    assert time_left(0, 6, 0.0) == ""  # no run has ended: no estimate yet
    assert time_left(6, 6, 60.0) == ""


def _runs(progress: RunProgress, clock: list[float], n: int, seconds: float) -> None:
    for r in range(n):
        progress("streamcli", r // 3, r % 3)
        clock[0] += seconds


def test_a_terminal_shows_a_bar_with_the_time_left() -> None:
    clock = [0.0]
    terminal = Console(force_terminal=True, width=100, file=io.StringIO())
    progress = RunProgress(6, 3, terminal, clock=lambda: clock[0])
    try:
        _runs(progress, clock, 3, 10.0)  # the third run starts after two of 10 s each
        assert progress.bar is not None
        shown = Console(width=100, record=True)
        shown.print(progress.bar.get_renderable())
        text = shown.export_text()
    finally:
        progress.close()
    assert "2/6 runs" in text and "00:40 left" in text, text
    assert "workers=0 run 3/3" in text


def test_a_pipe_gets_a_line_per_run_with_the_time_left() -> None:
    clock = [0.0]
    log = Console(width=200, record=True, force_terminal=False)
    progress = RunProgress(6, 3, log, clock=lambda: clock[0])
    _runs(progress, clock, 3, 10.0)
    progress.close()
    lines = log.export_text().splitlines()
    assert lines[0] == "streamcli: workers=0 run 1/3 (1 of 6)"
    assert lines[2] == "streamcli: workers=0 run 3/3 (3 of 6; about 40 s left)"


def test_quick_runs_one_short_run_per_count_and_prints_the_verdict() -> None:
    args = ["bench", "text", str(data_root("text")), "-b", "2", "-t", "4", "-w", "0", "--quick"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "20 batches x 1 runs" in result.output
    assert "bottleneck (workers=0):" in result.output
    assert "run 1/1 (1 of 1)" in result.output  # the progress line


def test_quick_is_explained_in_the_help_and_explicit_counts_still_win() -> None:
    help_text = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "200"}).output
    assert "--quick" in help_text and "20 timed batches after 2 warm-up" in help_text
    args = ["bench", "text", str(data_root("text")), "-b", "2", "-t", "4", "-w", "0", "--quick", "--batches", "7"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "7 batches x 1 runs" in result.output
