"""The small things a first hour with the CLI expects: version, completion, plugin options, did-you-mean,
skipped files in preview, bench's unknown load, its plot and its piped layout."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _dv import opencv_skips_dv
from conftest import data_root
from typer.testing import CliRunner

from streamcli import __version__
from streamcli.bench import BenchResult
from streamcli.cli import app
from streamcli.cli._bench_verdict import bottleneck
from streamcli.cli.cmd_bench import plot, results_text, ticks

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def result(name: str = "streamcli", workers: int = 1, busy: float = float("nan")) -> BenchResult:
    return BenchResult(name, workers, 100.0, 12345.0, 1.5, 0.2, 0.9, busy, 0.3, 250.0, 1, 10)


def test_version() -> None:
    result_ = runner.invoke(app, ["--version"])
    assert result_.exit_code == 0 and result_.output.strip() == f"streamcli {__version__}"


def test_completion_is_offered() -> None:
    out = runner.invoke(app, ["--help"], env=WIDE).output
    assert "--install-completion" in out and "--show-completion" in out
    from streamcli.cli._sources import complete_source

    assert complete_source("vi") == ["video"] and {"text", "camera"} <= set(complete_source(""))


def test_plugins_name_lists_options_with_types_and_defaults() -> None:
    result_ = runner.invoke(app, ["plugins", "text", "--json"])
    assert result_.exit_code == 0, result_.output
    opts = {o["name"]: o for o in json.loads(result_.output)["options"]}
    assert opts["width"] == {
        "name": "width",
        "type": "int",
        "default": 16,
        "description": "bytes (or token ids, with ``tokenizer``) per step.",
    }
    assert "arg" not in opts  # the PATH argument is not a -o option
    out = runner.invoke(app, ["plugins", "camera"], env=WIDE).output
    assert "size" in out and "tuple[int, int]" in out and "128,128" in out and "count" in out


@pytest.mark.parametrize(
    "args", [["plugins", "vidoe"], ["preview", "vidoe", "x"], ["preview", "vidoe"], ["export", "txet", "a", "out"]]
)
def test_a_misspelt_plugin_gets_did_you_mean(args: list[str]) -> None:
    result_ = runner.invoke(app, args)
    assert result_.exit_code == 2, result_.output
    assert "did you mean" in result_.output and ("'video'" in result_.output or "'text'" in result_.output)


def test_preview_counts_files_skipped_when_the_source_was_built() -> None:
    odd = data_root("video") / "odd"  # sound_not_video.mp4 is a WAV; realshort_ntsc.dv converts on some hosts only
    args = ["preview", "video", str(odd), "-b", "2", "-t", "2", "-w", "0", "-s", "size=8x8", "--batches", "1"]
    result_ = runner.invoke(app, args, env=WIDE)
    assert result_.exit_code == 0, result_.output
    assert f"skipped/failed {1 + len(opencv_skips_dv())}" in result_.output


def test_bench_reports_unknown_load_not_zero() -> None:
    assert "nan" not in bottleneck(result()) and "unknown" in bottleneck(result())
    text = results_text([result(), result(busy=0.5)], "title")
    rows = text.splitlines()
    assert rows[1].split()[:2] == ["loader", "workers"]
    assert " - " in rows[2] and "50%" in rows[3]


def test_bench_piped_layout_has_full_column_names(tmp_path: Path) -> None:
    args = ["bench", "text", str(data_root("text")), "-b", "2", "-t", "4", "-w", "0", "--batches", "5"]
    result_ = runner.invoke(app, [*args, "--repeats", "1"], env={"COLUMNS": "80"})
    assert result_.exit_code == 0, result_.output
    for name in ("loader", "workers", "batches/s", "steps/s", "wait p50", "1st batch", "peak RSS"):
        assert name in result_.output, name
    assert "…" not in result_.output


def test_ticks_are_round_and_cover_the_top() -> None:
    assert ticks(53358) == [0.0, 20000.0, 40000.0, 60000.0]
    assert ticks(0.0) == [0.0, 1.0]
    assert all(math.isclose(t % 0.25, 0) or math.isclose(t % 0.25, 0.25) for t in ticks(1.1))


def test_bench_plot_has_a_legend_with_full_names(tmp_path: Path) -> None:
    import cv2

    png = tmp_path / "bench.png"
    plot([result(workers=0), result(), result("torch DataLoader", 0)], png, "title")
    img = cv2.imread(str(png))
    assert img is not None and img.shape == (440, 760, 3)
    legend = img[-24:, :]  # the legend row holds both colours
    assert ((legend == (200, 120, 40)).all(-1)).any() and ((legend == (60, 60, 200)).all(-1)).any()
