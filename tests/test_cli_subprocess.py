"""The installed ``streamcli`` script in real processes: one run per command, kill -9 + resume, tmux."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import data_root, require_shared

BIN = Path(sys.executable).parent / "streamcli"
CAM = ["camera", "-s", "size=32x32", "-s", "steps=32", "-s", "count=6"]
pytestmark = pytest.mark.slow


def run(*args: str, timeout: float = 90, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload, no-any-return]


def test_help_is_fast_and_does_not_import_torch() -> None:
    r = subprocess.run([sys.executable, "-m", "streamcli", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "preview" in r.stdout
    code = "import sys, streamcli.cli; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_plugins_json_subprocess() -> None:
    r = run("plugins", "--json")
    assert r.returncode == 0, r.stderr
    names = {p["name"] for p in json.loads(r.stdout)}
    assert {"text", "camera", "video", "shards"} <= names


def test_usage_error_subprocess() -> None:
    r = run("preview", "nosuchplugin", "path")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("error: no plugin named 'nosuchplugin'") and len(r.stderr.splitlines()) == 1


def test_version_subprocess() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("streamcli ")


@pytest.mark.parametrize("how", ["empty", "zero", "notvideo", "outdir"])
def test_bad_input_exits_2_subprocess(how: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "zero.mp4").write_bytes(b"")
    (tmp_path / "file").write_text("x")
    args = {
        "empty": ["preview", "video", str(tmp_path / "empty")],
        "zero": ["preview", str(tmp_path / "zero.mp4")],
        "notvideo": ["preview", str(data_root("video") / "odd" / "sound_not_video.mp4")],
        "outdir": ["export", "text", str(data_root("text")), str(tmp_path / "file" / "out")],
    }[how]
    r = run(*args, "-w", "0", "--batches", "1")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and all(ln.startswith(("error: ", "warning: ")) for ln in lines), r.stderr
    assert "moov atom" not in r.stderr and "WARN" not in r.stderr and "UserWarning" not in r.stderr


def test_native_noise_hidden_unless_debug_subprocess() -> None:
    odd = str(require_shared("video") / "odd")  # sine.mp4 makes FFmpeg say "moov atom not found"
    args = ["preview", "video", odd, "-s", "size=8x8", "-b", "2", "-t", "2", "-w", "1", "--batches", "2"]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("warning: video: skipping") == 2 and "[ WARN" not in r.stderr and "moov" not in r.stderr
    # Earlier tests in this process may have quieted the video source, which sets the variable children inherit.
    env = {k: v for k, v in os.environ.items() if k not in ("OPENCV_FFMPEG_LOGLEVEL", "OPENCV_LOG_LEVEL")}
    r = run("--debug", *args, env=env)
    assert r.returncode == 0 and "moov atom not found" in r.stderr and "UserWarning" in r.stderr


def test_bench_piped_prints_full_column_names() -> None:
    r = run("bench", *CAM, "-b", "3", "-t", "4", "-w", "0", "--batches", "4", "--warmup", "1", "--repeats", "1")
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("loader"))
    assert header.split() == ["loader", "workers", "batches/s", "steps/s", "real", "steps", "MB/s", "wait", "p50",
                              "wait", "p95",
                              "busy", "1st", "batch", "peak", "RSS"]  # fmt: skip
    assert "…" not in r.stdout and "\x1b[" not in r.stdout


def test_preview_piped_with_a_worker() -> None:
    r = run("preview", *CAM, "-b", "3", "-t", "4", "-w", "1", "--batches", "5")
    assert r.returncode == 0, r.stderr
    assert "batches/s" in r.stdout and "worker 0" in r.stdout and "\x1b[" not in r.stdout


def test_bench_subprocess() -> None:
    r = run(
        "bench", *CAM, "-b", "3", "-t", "4", "-w", "0,1", "--batches", "8", "--warmup", "2", "--repeats", "1", "--json"
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["workers"] for x in out["results"]] == [0, 1]
    busy = out["results"][1]["busy"]
    assert (busy is None or busy > 0) and out["results"][1]["first_batch_s"] > 0  # None: too short to sample


def test_export_kill_9_then_resume_is_byte_identical(tmp_path: Path) -> None:
    args = [
        "camera", "-s", "size=64x64", "-s", "steps=96", "-s", "count=8", "-b", "4", "-t", "8", "-w", "0",
        "--shard-size", "300kB", "--epochs", "3",
    ]  # fmt: skip
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert run("export", *args, str(full), timeout=120).returncode == 0
    n_full = len(json.loads((full / "index.json").read_text())["shards"])
    proc = subprocess.Popen([str(BIN), "export", *args, str(cut)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (cut / "shard-00002.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert not (cut / "index.json").exists(), "the export finished before it could be killed"
    written = len(list(cut.glob("shard-*.npz")))
    assert 0 < written < n_full
    r = run("export", *args, str(cut), "--resume", timeout=120)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in full.iterdir()} == {p.name: p.read_bytes() for p in cut.iterdir()}
    assert run("verify", str(cut)).returncode == 0


# ----------------------------------------------------------------------------------------------------------
# preview in a real terminal (tmux)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    sock = f"streamcli-test-{os.getpid()}-{time.monotonic_ns()}"
    base = ["tmux", "-L", sock]
    yield base, tmp_path
    subprocess.run([*base, "kill-server"], capture_output=True)


def _start(base: list[str], tmp: Path, cmd: str, env: str = "COLORTERM=truecolor") -> None:
    # pytest exports COLUMNS=80 LINES=24, which Rich would obey over the real 160x50 pane.
    script = f"env -u COLUMNS -u LINES {env} {BIN} {cmd}; echo EXIT=$? > {tmp}/exit; stty -a > {tmp}/stty; sleep 60"
    subprocess.run([*base, "new-session", "-d", "-x", "160", "-y", "50", script], check=True)


def _pane(base: list[str], escapes: bool = True) -> str:
    args = [*base, "capture-pane", "-p"] + (["-e"] if escapes else [])
    return subprocess.run(args, capture_output=True, text=True).stdout


def _exited(tmp: Path) -> bool:
    """The shell wrote the command's exit status: ``echo ... > exit`` creates the file before it writes the line."""
    path = tmp / "exit"
    return path.exists() and path.read_text().endswith("\n")


def _wait_for(pred, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _batches(base: list[str]) -> int:
    """The batch count the preview shows. A capture can land mid-redraw, without the stats line: try again."""
    deadline = time.monotonic() + 5.0
    while True:
        m = re.search(r"batches (\d+)\s", _pane(base, False))
        if m or time.monotonic() > deadline:
            return int(m.group(1)) if m else -1
        time.sleep(0.05)


def _shown(base: list[str], pattern: str) -> float:
    """The first number ``pattern`` (one group) finds on the pane, -1 if none (a capture mid-redraw: try again)."""
    deadline = time.monotonic() + 5.0
    while True:
        m = re.search(pattern, _pane(base, False))
        if m or time.monotonic() > deadline:
            return float(m.group(1)) if m else -1.0
        time.sleep(0.05)


def test_preview_in_tmux_stops_after_batches(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    _start(base, tmp, "preview " + " ".join(CAM) + " -b 2 -t 4 -w 0 --epochs 0 --batches 40")
    assert _wait_for(lambda: _exited(tmp))
    assert (tmp / "exit").read_text().strip() == "EXIT=0"
    assert "preview: 40 batches" in _pane(base, False)
    _restored(base, tmp)


def _restored(base: list[str], tmp: Path) -> None:
    assert _wait_for(lambda: (tmp / "stty").exists() and (tmp / "stty").read_text())
    stty = (tmp / "stty").read_text().split()
    assert "icanon" in stty and "echo" in stty  # cbreak undone
    fmt = "#{alternate_on} #{cursor_flag}"
    flags = subprocess.run([*base, "display", "-p", fmt], capture_output=True, text=True).stdout.split()
    assert flags == ["0", "1"]  # alternate screen left, cursor shown


def test_preview_in_tmux_draws_colour_stats_and_quits_on_q(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    _start(base, tmp, "preview " + " ".join(CAM) + " -b 4 -t 4 -w 1 --epochs 0")
    assert _wait_for(lambda: "batches/s" in _pane(base, False) and "▀" in _pane(base, False)), _pane(base, False)
    pane = _pane(base)
    assert "\x1b[38;2;" in pane  # 24-bit half-block cells
    text = _pane(base, False)
    for needle in ("steps/s", "MB/s", "p50", "p95", "worker 0", "ready slots", "epoch", "camera-", "real data"):
        assert needle in text, needle
    subprocess.run([*base, "send-keys", "space"], check=True)
    assert _wait_for(lambda: "PAUSED" in _pane(base, False))
    before, rate = _batches(base), _shown(base, r"([\d.]+) batches/s")
    # The panel redraws while paused, and its batches/s (batches over the time since the first) falls as time
    # passes: once it has fallen by a fifth, the screen is a redraw from well after the pause.
    assert rate > 0 and _wait_for(lambda: 0 <= _shown(base, r"([\d.]+) batches/s") < 0.8 * rate), _pane(base, False)
    assert _batches(base) == before  # paused: nothing is pulled
    subprocess.run([*base, "send-keys", "n"], check=True)
    assert _wait_for(lambda: _batches(base) == before + 1)  # n steps exactly one batch
    subprocess.run([*base, "send-keys", "q"], check=True)
    assert _wait_for(lambda: _exited(tmp))
    assert (tmp / "exit").read_text().strip() == "EXIT=0"
    _restored(base, tmp)


def test_preview_in_tmux_hides_native_noise(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    odd = data_root("video") / "odd"  # OpenCV 5.0's FFmpeg complains about every frame of realshort_ntsc.dv
    _start(base, tmp, f"preview video {odd} -s size=16x16 -b 2 -t 2 -w 1 --epochs 0")
    assert _wait_for(lambda: "batches/s" in _pane(base, False)), _pane(base, False)
    # Two epochs: every clip, the noisy one included, has been read through at least once before the pane is read.
    assert _wait_for(lambda: _shown(base, r"epoch (\d+)\s+skipped") >= 2), _pane(base, False)
    pane = _pane(base, False)
    assert "WARN" not in pane and "moov" not in pane and "UserWarning" not in pane
    subprocess.run([*base, "send-keys", "q"], check=True)
    assert _wait_for(lambda: _exited(tmp))
    assert (tmp / "exit").read_text().strip() == "EXIT=0"
    _restored(base, tmp)


def test_preview_in_tmux_ctrl_c_restores_the_terminal(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    _start(base, tmp, "preview " + " ".join(CAM) + " -b 2 -t 4 -w 0 --epochs 0", env="COLORTERM=")
    assert _wait_for(lambda: "batches/s" in _pane(base, False)), _pane(base, False)
    assert "256-colour" in _pane(base, False)  # said, not silently degraded
    assert "\x1b[38;5;" in _pane(base)
    subprocess.run([*base, "send-keys", "C-c"], check=True)
    assert _wait_for(lambda: _exited(tmp))
    assert (tmp / "exit").read_text().strip() == "EXIT=130"
    _restored(base, tmp)


def test_preview_in_tmux_error_restores_the_terminal(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    books = tmp / "books"
    books.mkdir()
    (books / "a.txt").write_text("x" * 10_000)
    (books / "b.txt").write_text("doomed")
    # One row, one byte a batch, no shuffle: b.txt is opened only after a.txt's 10,000 batches. The preview is
    # paused long before that, b.txt removed, and the preview let go on to it.
    _start(base, tmp, f"preview text {books} -b 1 -t 1 -w 0 --no-shuffle -s width=1 --epochs 0")
    assert _wait_for(lambda: "batches/s" in _pane(base, False)), _pane(base, False)
    subprocess.run([*base, "send-keys", "space"], check=True)
    assert _wait_for(lambda: "PAUSED" in _pane(base, False)), _pane(base, False)
    assert 0 < _batches(base) < 10_000, "the preview reached b.txt before it was paused"
    (books / "b.txt").unlink()
    subprocess.run([*base, "send-keys", "space"], check=True)
    assert _wait_for(lambda: _exited(tmp), timeout=60)
    assert (tmp / "exit").read_text().strip() == "EXIT=1"
    pane = _pane(base, False)
    assert "error: " in pane and "b.txt" in pane and "Traceback" not in pane
    _restored(base, tmp)


def test_preview_in_tmux_shows_scan_progress_and_start_up(tmux: tuple[list[str], Path]) -> None:
    base, tmp = tmux
    video = data_root("video")  # a fresh cache: the length scan decodes every clip once (a few seconds)
    env = f"COLORTERM=truecolor STREAMCLI_CACHE_DIR={tmp / 'cache'}"
    _start(base, tmp, f"preview video {video} -s scan=true -s size=16x16 -b 4 -t 4 -w 2 --batches 30", env=env)
    seen: set[str] = set()

    def look() -> bool:
        text = _pane(base, False)
        seen.update(k for k in ("scanning lengths", "waiting for the first batch") if k in text)
        return len(seen) == 2 or _exited(tmp)

    assert _wait_for(look, timeout=90), _pane(base, False)
    assert seen == {"scanning lengths", "waiting for the first batch"}, seen
    assert _wait_for(lambda: _exited(tmp), timeout=90)
    assert (tmp / "exit").read_text().strip() == "EXIT=0"


def test_export_summary_names_the_padding_and_the_fix_subprocess(tmp_path: Path) -> None:
    books = str(data_root("text"))  # 2 books for 8 rows: most steps are padding
    r = run("export", "text", books, str(tmp_path / "a"), "-b", "8", "-t", "16", "-w", "0")
    assert r.returncode == 0, r.stderr
    assert "of the steps are real data" in r.stderr and "hint:" in r.stderr and "--segment" in r.stderr
    r = run("export", "text", books, str(tmp_path / "b"), "-b", "8", "-t", "16", "-w", "0", "--segment", "32")
    assert r.returncode == 0, r.stderr
    words = " ".join(r.stderr.split())  # Rich wraps the summary at the terminal's width
    assert "97% of the steps are real data" in words and "hint:" not in words
