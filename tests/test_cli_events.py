"""``streamcli events-from-video`` and the events source behind the CLI: round trips, usage errors, missing extras."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import data_root
from streamcli_sources.events import decoded
from streamcli_sources.events.simulate import Simulator, from_source, write_recording
from typer.testing import CliRunner

from streamcli import load_source
from streamcli.cli import app
from streamcli.source import iter_steps

runner = CliRunner()
CLIP = data_root("video") / "realshort.mp4"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded copies go to this test's folder, so no test finds another's (or the user's) in the cache."""
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))


def one_red_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: ") and "Traceback" not in output
    return lines[0]


def read_back(folder: Path) -> list[np.ndarray]:
    """Every recording in ``folder`` as (N, 4) rows x, y, t, p, read by the events source (one window each)."""
    src = load_source("events", folder, representation="raw", capacity=200_000, window_us=10**9)
    out = []
    for item in src.items():
        (step,) = iter_steps(src, item)
        out.append(np.asarray(step["events"])[: int(step["count"])])
    return out


def rows(ev: np.ndarray) -> np.ndarray:
    return np.stack([ev[f].astype(np.int64) for f in "xytp"], axis=1)


@pytest.mark.slow
def test_a_real_clip_becomes_an_evt3_file_the_events_source_reads_back_bit_exact(tmp_path: Path) -> None:
    pytest.importorskip("faery")
    out = tmp_path / "ev"
    flags = ["--threshold", "0.15", "--refractory-us", "500", "--noise", "0.2", "--seed", "7"]
    result = runner.invoke(app, ["events-from-video", "video", str(CLIP), str(out), "--to", "evt3", *flags])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["00000-realshort.raw", "events-from-video.json"]
    video = load_source("video", str(CLIP))
    (item,) = video.items()
    want = from_source(video, item, Simulator(0.15, refractory_us=500, noise_hz=0.2, seed=7))
    assert len(want) > 1000
    (got,) = read_back(out)
    np.testing.assert_array_equal(got, rows(want))
    assert f"wrote 1 recording ({len(want):,} events over" in result.output and "as EVT 3.0 (.raw)" in result.output


def test_the_help_explains_the_command_with_an_example() -> None:
    result = runner.invoke(app, ["events-from-video", "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output and "streamcli events-from-video" in result.output
    assert "not an option of export" in " ".join(result.output.split())


@pytest.mark.slow
@pytest.mark.parametrize("to", ["npy", "aedat4", "evt3"])
def test_camera_streams_become_one_file_each_and_json_reports_them(tmp_path: Path, to: str) -> None:
    if to != "npy":
        pytest.importorskip("faery")
    out = tmp_path / "ev"
    args = ["events-from-video", "camera", "2", str(out), "-s", "steps=5", "-s", "size=24x32", "--to", to, "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["recordings"] == 2 and report["format"] == to and report["sensor_size"] == [24, 32]
    cam = load_source("camera", 2, steps=5, size=(24, 32))
    want = [from_source(cam, i) for i in cam.items()]
    assert report["events"] == sum(len(w) for w in want) > 0
    assert [f["events"] for f in report["files"]] == [len(w) for w in want]
    for got, w in zip(read_back(out), want, strict=True):
        np.testing.assert_array_equal(got, rows(w))


def test_an_unknown_format_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    result = runner.invoke(app, ["events-from-video", "camera", str(tmp_path / "ev"), "--to", "evt4"])
    assert result.exit_code == 2
    assert "--to 'evt4' must be one of evt3, aedat4, npy" in one_red_line(result.output)
    assert not (tmp_path / "ev").exists()


def test_a_bad_threshold_is_named_by_its_flag(tmp_path: Path) -> None:
    result = runner.invoke(app, ["events-from-video", "camera", str(tmp_path / "ev"), "--threshold", "0"])
    assert result.exit_code == 2
    assert "--threshold 0.0 must be a positive contrast" in one_red_line(result.output)


def test_a_folder_with_files_is_not_written_into_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    result = runner.invoke(app, ["events-from-video", "camera", str(tmp_path), "--to", "npy"])
    assert result.exit_code == 2
    assert "holds 'mine.txt', which events-from-video did not write" in one_red_line(result.output)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_overwrite_replaces_an_earlier_runs_recordings_and_keeps_other_files(tmp_path: Path) -> None:
    flags = ["-s", "steps=3", "-s", "size=8x8", "--to", "npy"]
    assert runner.invoke(app, ["events-from-video", "camera", "2", str(tmp_path), *flags]).exit_code == 0
    (tmp_path / "notes.txt").write_text("keep")
    result = runner.invoke(app, ["events-from-video", "camera", "1", str(tmp_path), *flags, "--overwrite"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000-camera-0.npy", "events-from-video.json", "notes.txt"]


def test_a_vendor_format_without_faery_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "faery", None)  # `import faery` fails, find_spec says missing
    result = runner.invoke(app, ["events-from-video", "camera", str(tmp_path / "ev"), "--to", "aedat4"])
    assert result.exit_code == 2
    line = one_red_line(result.output)
    assert "--to aedat4 needs faery" in line and "pip install 'streamcli[events]'" in line


def test_a_write_that_fails_midway_leaves_no_file_under_the_recordings_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half(path: str, events: np.ndarray, sensor: tuple[int, int], *a: object, **k: object) -> str:
        Path(path).write_bytes(b"half a header")
        raise OSError("disk full")

    monkeypatch.setattr("streamcli_sources.events.simulate.write_file", half)
    ev = np.zeros(2, [("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])
    with pytest.raises(OSError, match="disk full"):
        write_recording(tmp_path / "00000-a.raw", ev, (4, 4))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["preview", "--batches", "1"], ["bench", "--batches", "1", "--warmup", "0"],
                                     ["export", "--batches", "1"]])  # fmt: skip
def test_an_events_source_without_faery_is_one_line_naming_the_extra_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    ev = np.zeros(3, [("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])
    ev["t"] = [0, 10, 20]
    pytest.importorskip("faery")
    decoded.write_file(str(tmp_path / "rec.raw"), ev, (4, 4))
    monkeypatch.setitem(sys.modules, "faery", None)
    name, *rest = command
    tail = [str(tmp_path / "out")] if name == "export" else []
    result = runner.invoke(app, [name, "events", str(tmp_path / "rec.raw"), *tail, *rest, "-w", "0"])
    assert result.exit_code == 2, result.output
    line = one_red_line(result.output)
    assert "needs faery" in line and "pip install 'streamcli[events]'" in line
