"""``streamcli events-from-video`` against hostile folders and values: a user's files beside the recordings, a
tampered manifest, non-finite simulator settings, a full disk, an OUT_DIR under a regular file."""

from __future__ import annotations

import errno
import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import require_shared
from typer.testing import CliRunner

from streamcli.cli import app

runner = CliRunner()
MANIFEST = "events-from-video.json"
CAMERA = ["-s", "steps=3", "-s", "size=8x8", "--to", "npy"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))


def one_red_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: ") and "Traceback" not in output
    return lines[0]


def cameras(n: int, out: Path, *flags: str) -> Any:
    return runner.invoke(app, ["events-from-video", "camera", str(n), str(out), *CAMERA, *flags])


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --overwrite deletes only what the previous run's manifest names


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
def test_a_users_recording_shaped_file_without_a_manifest_is_named_and_never_deleted(
    tmp_path: Path, flags: list[str]
) -> None:
    out = tmp_path / "ev"
    out.mkdir()
    (out / "00001-holiday.raw").write_bytes(b"my holiday")
    result = cameras(2, out, *flags)
    assert result.exit_code == 2, result.output
    line = one_red_line(result.output)
    assert "'00001-holiday.raw', which events-from-video did not write" in line
    assert "pick an empty folder" in line and "--overwrite deletes only" in line
    assert names(out) == ["00001-holiday.raw"] and (out / "00001-holiday.raw").read_bytes() == b"my holiday"


def test_overwrite_deletes_the_earlier_runs_files_and_keeps_a_users_file_of_the_same_shape(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    assert cameras(2, out).exit_code == 0
    assert names(out) == ["00000-camera-0.npy", "00001-camera-1.npy", MANIFEST]
    (out / "00005-holiday.raw").write_bytes(b"my holiday")
    result = cameras(2, out)
    assert result.exit_code == 2
    assert "pass --overwrite to replace the event files an earlier run wrote" in one_red_line(result.output)
    result = cameras(1, out, "--overwrite")
    assert result.exit_code == 0, result.output
    assert names(out) == ["00000-camera-0.npy", "00005-holiday.raw", MANIFEST]
    assert (out / "00005-holiday.raw").read_bytes() == b"my holiday"
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["files"] == ["00000-camera-0.npy"] and manifest["complete"] is True and manifest["format"] == "npy"


def test_a_users_file_where_a_recording_would_go_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    assert cameras(1, out).exit_code == 0
    before = (out / "00000-camera-0.npy").read_bytes()
    (out / "00001-camera-1.npy").write_bytes(b"mine")
    result = cameras(2, out, "--overwrite")
    assert result.exit_code == 2
    assert "holds '00001-camera-1.npy', which events-from-video did not write" in one_red_line(result.output)
    assert (out / "00001-camera-1.npy").read_bytes() == b"mine"
    assert (out / "00000-camera-0.npy").read_bytes() == before  # nothing of the earlier run went either


@pytest.mark.parametrize("files", [["../outside.npy"], ["notes.txt"], "00000-a.npy", [1]])
def test_a_manifest_naming_files_the_command_never_writes_is_refused_not_obeyed(tmp_path: Path, files: Any) -> None:
    out = tmp_path / "ev"
    assert cameras(1, out).exit_code == 0
    (tmp_path / "outside.npy").write_bytes(b"keep")
    (out / "notes.txt").write_text("keep")
    (out / MANIFEST).write_text(json.dumps({"files": files}))
    result = cameras(1, out, "--overwrite")
    assert result.exit_code == 2
    assert "names files events-from-video does not write" in one_red_line(result.output)
    assert (tmp_path / "outside.npy").read_bytes() == b"keep" and (out / "notes.txt").read_text() == "keep"


def test_a_manifest_that_is_not_json_is_one_line_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    assert cameras(1, out).exit_code == 0
    (out / MANIFEST).write_bytes(b'{"files": ["00000-ca')
    result = cameras(1, out, "--overwrite")
    assert result.exit_code == 2
    assert f"{str(out / MANIFEST)!r} is not a manifest events-from-video wrote" in one_red_line(result.output)


# non-finite and out-of-range simulator settings


@pytest.mark.parametrize(
    ("flag", "value", "valid"),
    [
        ("--noise", "nan", "from 0 to 1,000,000"),
        ("--noise", "inf", "from 0 to 1,000,000"),
        ("--noise", "-1", "from 0 to 1,000,000"),
        ("--noise", "1e7", "from 0 to 1,000,000"),
        ("--threshold", "inf", "a finite number > 0"),
        ("--threshold", "nan", "a finite number > 0"),
        ("--threshold", "-0.5", "a finite number > 0"),
        ("--refractory-us", "-1", ">= 0"),
        ("--noise-seed", "-1", ">= 0"),
        ("--fps", "inf", "finite frame rate > 0"),
    ],
)
def test_a_non_finite_or_out_of_range_setting_is_refused_naming_the_flag_value_and_range(
    tmp_path: Path, flag: str, value: str, valid: str
) -> None:
    out = tmp_path / "ev"
    result = cameras(1, out, flag, value)
    assert result.exit_code == 2, result.output
    line = one_red_line(result.output)
    shown = str(float(value)) if flag in ("--noise", "--threshold", "--fps") else value
    assert f"{flag} {shown} must be" in line and valid in line
    assert not out.exists()


# OUT_DIR under a regular file


@pytest.mark.parametrize("under", ["somefile/sub", "somefile/sub/deeper"])
def test_an_out_dir_under_a_regular_file_is_a_usage_error_naming_the_file(tmp_path: Path, under: str) -> None:
    (tmp_path / "somefile").write_text("x")
    result = cameras(1, tmp_path / under)
    assert result.exit_code == 2, result.output
    line = one_red_line(result.output)
    assert f"{str(tmp_path / 'somefile')!r} is a file, not a folder" in line
    assert (tmp_path / "somefile").read_text() == "x"


# a full disk


class FullDisk:
    """faery's EVT/AEDAT encoders, failing with ENOSPC on the write of the ``fail_at``-th recording, after the
    real encoder has created its ``*.partial.write`` file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int) -> None:
        fe: Any = importlib.import_module("faery.file_encoder")
        self.opened = 0
        self.fail_at = fail_at
        for module in (fe.evt, fe.aedat):
            monkeypatch.setattr(module, "Encoder", self.wrap(module.Encoder))

    def wrap(self, real: Any) -> Any:
        disk = self

        class Encoder:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self.real = real(*args, **kwargs)
                self.path = Path(kwargs["path"])
                disk.opened += 1

            def __enter__(self) -> Encoder:
                self.real.__enter__()
                return self

            def __exit__(self, *exc: Any) -> Any:
                return self.real.__exit__(*exc)

            def write(self, *args: Any) -> None:
                if disk.opened >= disk.fail_at:
                    assert self.path.exists() and self.path.name.endswith(".partial.write")  # faery's temp
                    raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
                self.real.write(*args)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.real, name)

        return Encoder


@pytest.mark.parametrize("to", ["evt3", "aedat4"])
def test_a_full_disk_midway_leaves_no_partial_file_and_no_recording_of_the_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to: str
) -> None:
    pytest.importorskip("faery")
    disk = FullDisk(monkeypatch, fail_at=2)
    out = tmp_path / "ev"
    args = ["events-from-video", "camera", "3", str(out), "-s", "steps=4", "-s", "size=16x16", "--to", to]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    suffix = ".raw" if to == "evt3" else ".aedat4"
    assert f"error: cannot write {str(out / ('00001-camera-1' + suffix))!r}: " in result.output
    assert "No space left on device" in result.output and "Traceback" not in result.output
    assert disk.opened == 2
    assert not out.exists()  # created by the run, and nothing of it is left


@pytest.mark.slow
def test_a_full_disk_over_real_clips_with_overwrite_leaves_only_the_users_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("faery")
    video = require_shared("video")
    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("dummy_video.avi", "odd/small_movie.mp4"):
        shutil.copy(video / name, clips)
    out = tmp_path / "ev"
    args = ["events-from-video", "video", str(clips), str(out), "--to", "evt3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert names(out) == ["00000-dummy_video.raw", "00001-small_movie.raw", MANIFEST]
    (out / "notes.txt").write_text("keep")
    FullDisk(monkeypatch, fail_at=2)
    result = runner.invoke(app, [*args, "--overwrite"])
    assert result.exit_code == 1, result.output
    assert names(out) == ["notes.txt"]  # no *.partial.write, no half set of recordings, no manifest naming them


def test_a_failed_npy_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = np.save
    calls: list[int] = []

    def full(f: Any, arr: Any, *a: Any, **k: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            f.write(b"\x93NUMPY half")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(f, arr, *a, **k)

    monkeypatch.setattr("streamcli_sources.events.simulate.np.save", full)
    out = tmp_path / "ev"
    out.mkdir()
    result = cameras(3, out)
    assert result.exit_code == 1, result.output
    assert names(out) == []  # the folder was the user's (empty): it stays
