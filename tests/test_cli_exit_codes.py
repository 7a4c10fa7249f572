"""Bad input is a usage error (exit 2) whether the plugin was named or inferred; warnings are one line each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _dv import opencv_skips_dv
from conftest import data_root
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli._noise import NativeStderr

runner = CliRunner()
TINY = ["-b", "2", "-t", "2", "-w", "0", "--batches", "1"]


def cases(tmp: Path) -> dict[str, list[str]]:
    (tmp / "empty").mkdir()
    (tmp / "zero.mp4").write_bytes(b"")
    (tmp / "file").write_text("x")
    odd = data_root("video") / "odd"
    return {
        "empty folder, named": ["preview", "video", str(tmp / "empty")],
        "empty folder, inferred": ["preview", str(tmp / "empty")],
        "empty folder, text": ["preview", "text", str(tmp / "empty")],
        "no usable video, named": ["preview", "video", str(odd / "sine.mp4")],
        "not a video, inferred": ["preview", str(odd / "sound_not_video.mp4")],
        "0-byte file, inferred": ["preview", str(tmp / "zero.mp4")],
        "0-byte file, named": ["export", "video", str(tmp / "zero.mp4"), str(tmp / "out")],
        "OUT_DIR under a file": ["export", "text", str(data_root("text")), str(tmp / "file" / "out")],
    }


@pytest.mark.parametrize(
    "case",
    [
        "empty folder, named", "empty folder, inferred", "empty folder, text", "no usable video, named",
        "not a video, inferred", "0-byte file, inferred", "0-byte file, named", "OUT_DIR under a file",
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_error_line(case: str, tmp_path: Path) -> None:
    result = runner.invoke(app, [*cases(tmp_path)[case], *TINY])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and all(ln.startswith(("error: ", "warning: ")) for ln in lines), result.output
    assert "Traceback" not in result.output and "UserWarning" not in result.output


def test_source_messages_name_the_o_flag() -> None:
    result = runner.invoke(app, ["preview", "audio", str(data_root("audio")), "-s", "mismatch=bogus", *TINY])
    assert result.exit_code == 2
    assert "error: audio: -s mismatch='bogus' must be" in result.output


def test_skipped_files_are_one_warning_line_each() -> None:
    odd = data_root("video") / "odd"
    result = runner.invoke(app, ["preview", "video", str(odd), "-s", "size=8x8", *TINY])
    assert result.exit_code == 0, result.output
    warned = [ln for ln in result.output.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 1 + len(opencv_skips_dv()) and all("skipping" in ln for ln in warned)
    assert "UserWarning" not in result.output and ".py:" not in result.output


def test_native_stderr_is_caught_and_restored(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(2).st_ino
    with NativeStderr(debug=False) as native:
        os.write(2, b"[h264 @ 0x1] missing picture\nx.py:3: UserWarning: from a worker\n")
    assert os.fstat(2).st_ino == before
    assert "missing picture" in native.text
    native.report()
    err = capfd.readouterr().err
    assert "missing picture" not in err and "warning: from a worker" in err
    with NativeStderr(debug=True) as native:
        os.write(2, b"[h264 @ 0x1] missing picture\n")
    native.report()
    assert "missing picture" in capfd.readouterr().err


def test_native_stderr_is_restored_on_error() -> None:
    before = os.fstat(2).st_ino
    with pytest.raises(KeyboardInterrupt), NativeStderr(debug=False):
        raise KeyboardInterrupt
    assert os.fstat(2).st_ino == before
