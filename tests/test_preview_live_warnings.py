"""Preview shows what happens as it happens (issue 46, point 6): a damaged clip's warning appears in the live panel
while the view runs, not only after q; a scalar field shows the row's recent steps, not one number."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest
from conftest import require_shared
from rich.console import Console
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli.preview import dashboard
from streamcli.stats import LoaderStats

runner = CliRunner()
LEAVE_SCREEN = "\x1b[?1049l"  # the live view's alternate screen ends here: what follows is printed after q


def stats() -> LoaderStats:
    return LoaderStats(
        batches=3, steps=12, bytes=100, elapsed_s=1.0, first_batch_s=0.1, waits_s=(0.01,), worker_busy=(0.5,),
        worker_steps=(12,), ready_slots=1, num_slots=4, epoch=0, streams_done=0, streams_total=2, skipped=0,
        copies=0, steps_per_batch=4, batch_size=1,
    )  # fmt: skip


def test_the_panel_shows_the_latest_warning_and_how_many_there_are() -> None:
    said = ["video: a.avi: stopped at frame 3 of the 9", "video: b.avi: stopped at frame 13 of the 25"]
    console = Console(width=120, record=True, color_system=None)
    console.print(dashboard(None, stats(), width=120, height=40, color_system="256", warnings=said))
    text = console.export_text()
    assert "b.avi: stopped at frame 13 of the 25" in text and "2 warnings" in text
    assert "a.avi" not in text  # the latest only: all of them are printed after q


def run_in_a_terminal(args: list[str], timeout: float = 180.0) -> str:
    """The command on a pseudo-terminal of 160x50 cells: everything it drew, escape codes included."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
    env |= {"TERM": "xterm-256color", "COLORTERM": "truecolor"}
    cmd = [sys.executable, "-m", "streamcli", *args]
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out, end = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait(timeout=30)
        os.close(master)
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_damaged_clips_warning_shows_in_the_live_panel_before_q(tmp_path: Path, workers: str) -> None:
    whole = (require_shared("video") / "retroMars2018.avi").read_bytes()
    clip = tmp_path / "retro-half.avi"  # the first half of the bytes: 13 of its 25 frames
    clip.write_bytes(whole[: len(whole) // 2])
    args = ["preview", "video", str(clip), "-b", "2", "-t", "4", "-w", workers, "-s", "size=16x16"]
    screen = run_in_a_terminal([*args, "--batches", "4", "--epochs", "1"])
    live = screen.split(LEAVE_SCREEN)[0]
    assert LEAVE_SCREEN in screen and "retro-half.avi" in live and "stopped at frame 13" in live, live[-2000:]


COUNTER = textwrap.dedent(
    """
    import numpy as np
    from streamcli.source import BaseSource, Field

    class Counts(BaseSource):
        def items(self):
            return [0, 1]

        def fields(self):
            return [Field("tok", (), "int64")]

        def length(self, item):
            return 12

        def open(self, item, start=0):
            for k in range(start, 12):
                yield {"tok": np.int64(100 * item + k)}
    """
)


def test_a_scalar_field_shows_the_rows_recent_steps(tmp_path: Path) -> None:
    (tmp_path / "counter.py").write_text(COUNTER)
    args = ["preview", f"{tmp_path / 'counter.py'}:Counts", "-b", "2", "-t", "12", "-w", "0", "--batches", "1"]
    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "tok … 4 5 6 7 8 9 10 11" in out.output and "tok … 104 105 106 107 108 109 110 111" in out.output, out.output
    assert "tok=11" not in out.output
