"""The CLI through Typer's CliRunner: exit codes first, then output."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

import streamcli.plugins as plugins_mod
from streamcli.cli import app
from streamcli.cli._source_options import convert

runner = CliRunner()
TINY = ["-b", "2", "-t", "4", "-w", "0"]


@pytest.fixture
def broken_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin whose module does not import, next to the real ones."""
    real = plugins_mod._entry_points

    def eps() -> list[EntryPoint]:
        bad = EntryPoint(name="aaa_broken", value="no_such_module_xyz:Source", group=plugins_mod.GROUP)
        return sorted([*real(), bad], key=lambda e: e.name)

    monkeypatch.setattr(plugins_mod, "_entry_points", eps)


def one_red_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("command", ["plugins", "preview", "bench", "export", "verify"])
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output and f"streamcli {command}" in result.output


def test_plugins_json_lists_builtins_and_reports_a_broken_one(broken_plugin: None) -> None:
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert {"text", "video", "camera", "shards", "aaa_broken"} <= set(rows)
    assert rows["aaa_broken"]["status"] == "broken" and "no_such_module_xyz" in rows["aaa_broken"]["error"]
    cam = rows["camera"]
    assert cam["status"] == "ok" and cam["value"] == "streamcli_sources.camera:CameraSource"
    assert cam["distribution"] == "streamcli" and cam["version"]
    assert {f["name"] for f in cam["fields"]} >= {"frame", "homography"}


def test_plugins_table(broken_plugin: None) -> None:
    result = runner.invoke(app, ["plugins"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "aaa_broken" in result.output and "broken" in result.output and "camera" in result.output


def test_a_broken_plugin_does_not_stop_others(broken_plugin: None, books: Path) -> None:
    result = runner.invoke(app, ["preview", str(books), *TINY, "--batches", "1"])  # inference skips it
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["preview", "nosuchplugin", "x"], "no plugin named 'nosuchplugin'; installed plugins: "),
        (["preview", "nosuchthing"], "neither an installed plugin nor an existing path"),
        (["preview", "text", "/no/such/folder"], "'/no/such/folder' does not exist"),
        (["preview", "text", "-s", "colour=red"], "no option 'colour'; valid options: "),
        (["preview", "text", "-s", "width=wide"], "-s width=wide: 'wide' is not an integer"),
        (["preview", "text", "-s", "width"], "must be key=value"),
        (["preview", "-b", "0", "--batches", "1"], "-b/--batch-size 0 must be"),
        (["preview", "--boundary", "sideways"], "sideways"),
        (["bench", "-w", "a"], "-w/--workers 'a' must be a worker count"),
        (["export", "text", "x", "out", "--shard-size", "lots"], "--shard-size"),
    ],
)
def test_usage_errors_are_one_red_line_and_exit_2(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert needle in one_red_line(result)


def test_a_folder_with_no_streams_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["preview", "text", str(tmp_path)])
    assert result.exit_code == 2
    assert "no streams found" in one_red_line(result)


def test_runtime_failures_exit_1_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text("{not json")
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 1
    assert "not valid JSON" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["--debug", "verify", str(tmp_path)])
    assert result.exit_code == 1 and type(result.exception).__name__ == "ShardError"


def test_option_conversion() -> None:
    assert convert("64x48", tuple[int, int]) == (64, 48)
    assert convert("64,48", tuple[int, int] | int) == (64, 48)
    assert convert("64", tuple[int, int] | int) == 64
    assert convert("yes", bool) is True and convert("0", bool) is False
    assert convert("0.5", float) == 0.5 and convert("abc", str) == "abc"
    assert convert("none", int | None) is None
    with pytest.raises(ValueError, match="needs 2 values"):
        convert("1x2x3", tuple[int, int])


def test_preview_on_a_non_terminal_prints_a_summary(books: Path) -> None:
    result = runner.invoke(app, ["preview", "text", str(books), *TINY, "-s", "width=8", "--batches", "3"])
    assert result.exit_code == 0, result.output
    assert "batches/s" in result.output and "p95" in result.output and "b1.txt" in result.output


def test_preview_infers_the_plugin_and_writes_a_snapshot(books: Path, tmp_path: Path) -> None:
    png = tmp_path / "grid.png"
    result = runner.invoke(app, ["preview", str(books), *TINY, "--batches", "2", "--snapshot", str(png)])
    assert result.exit_code == 0, result.output
    assert png.stat().st_size > 0


def test_preview_defaults_to_the_camera() -> None:
    result = runner.invoke(app, ["preview", *TINY, "-s", "size=16x16", "-s", "steps=8", "--batches", "2"])
    assert result.exit_code == 0, result.output
    assert "camera" in result.output and "frame 16x16" in result.output


def test_export_verify_replay_round_trip(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["export", "text", str(books), str(out), *TINY, "-s", "width=8", "--shard-size", "256"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    m = json.loads((out / "index.json").read_text())
    assert m["source"] == {"plugin": "text", "arg": str(books), "options": {"width": 8}}
    assert m["loader"]["boundary"] == "pad" and m["loader"]["seed"] == 0 and len(m["shards"]) > 1
    assert runner.invoke(app, ["verify", str(out)]).exit_code == 0
    # a non-empty OUT_DIR is refused; --overwrite replaces it
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--overwrite" in one_red_line(result)
    assert runner.invoke(app, [*args, "--overwrite", "--batches", "2"]).exit_code == 0
    assert json.loads((out / "index.json").read_text())["batches"] == 2
    # the export previews through the shards source, inferred from the folder
    result = runner.invoke(app, ["preview", str(out), *TINY, "--batches", "1"])
    assert result.exit_code == 0, result.output
    assert "shards" in result.output


def test_verify_fails_on_a_flipped_byte(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["export", "text", str(books), str(out), *TINY]).exit_code == 0
    shard = out / "shard-00000.npz"
    data = bytearray(shard.read_bytes())
    data[-200] ^= 0x10
    shard.write_bytes(bytes(data))
    result = runner.invoke(app, ["verify", str(out)])
    assert result.exit_code == 1
    assert "problem: shard 'shard-00000.npz'" in result.output and "1 problem(s)" in result.output


def test_bench_json(books: Path, tmp_path: Path) -> None:
    png = tmp_path / "bench.png"
    args = ["bench", "text", str(books), "-b", "2", "-t", "4", "-w", "0", "--batches", "5", "--warmup", "1"]
    result = runner.invoke(app, [*args, "--repeats", "1", "--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    (r,) = out["results"]
    assert r["workers"] == 0 and r["batches_per_s"] > 0 and r["steps_per_s"] > 0
    for key in ("mb_per_s", "wait_p50_ms", "wait_p95_ms", "first_batch_s", "peak_rss_mb", "busy"):
        assert key in r
    assert out["bottleneck"] and png.stat().st_size > 0


def test_bench_table_names_the_bottleneck(books: Path) -> None:
    args = ["bench", "text", str(books), "-b", "2", "-t", "4", "-w", "0", "--batches", "5", "--repeats", "1"]
    result = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "batches/s" in result.output and "bottleneck" in result.output


def test_samples_writes_clips_once_and_they_preview(tmp_path: Path) -> None:
    args = ["samples", str(tmp_path / "samples"), "--count", "2", "--steps", "6", "-s", "size=16x24"]
    out = tmp_path / "samples" / "clips"
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["camera-00.mp4", "camera-01.mp4"]
    assert "already" in runner.invoke(app, args).output
    result = runner.invoke(app, ["preview", "video", str(out), *TINY, "--batches", "2"])
    assert result.exit_code == 0, result.output
    assert "camera-00.mp4" in result.output or "camera-01.mp4" in result.output


def test_the_source_argument_is_converted_by_its_annotation() -> None:
    result = runner.invoke(
        app, ["preview", "camera", "3", *TINY, "-s", "size=16x16", "-s", "steps=4", "--batches", "9"]
    )
    assert result.exit_code == 0, result.output
    assert "/3 done" in result.output
