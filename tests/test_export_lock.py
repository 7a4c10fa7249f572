"""One export at a time per folder: a second one is refused, naming the first; the lock dies with its process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _shard_fakes import make_batch
from test_shards_edges import header
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.errors import ExportBusyError, ShardError
from streamcli.shards import ShardWriter, export, verify
from streamcli.shards.format import LOCK
from streamcli.shards.lock import FolderLock

runner = CliRunner()
HOLD = (
    "import sys; from streamcli.shards.lock import FolderLock; "
    "lock = FolderLock(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
)


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock of ``tmp_path / 'out'`` until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "out")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.mark.slow  # the lock's holder is another process
def test_a_second_export_is_refused_naming_the_first(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    out = tmp_path / "out"
    export((make_batch(i) for i in range(3)), tmp_path / "other", header())
    for p in (tmp_path / "other").iterdir():  # an export already in the folder: overwrite and resume must wait
        if p.name != LOCK:
            p.rename(out / p.name)
    before = files(out)
    for mode in ("overwrite", "resume", "new"):
        with pytest.raises(ExportBusyError, match=rf"being written by another export \(pid {holder.pid} on "):
            export((make_batch(i) for i in range(3)), out, header(), mode=mode)
    assert files(out) == before  # nothing was touched
    assert any(f"pid {holder.pid}" in p and "writing" in p for p in verify(out))
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait()
    assert export((make_batch(i) for i in range(3)), out, header(), mode="overwrite")["batches"] == 3
    assert verify(out) == [] and not (out / LOCK).exists()  # released and removed at the end


@pytest.mark.slow  # the lock's holder is another process
def test_the_lock_dies_with_a_killed_holder(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    out = tmp_path / "out"
    with pytest.raises(ExportBusyError):
        FolderLock(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (out / LOCK).exists()  # left by the kill, but nobody holds it
    assert export((make_batch(i) for i in range(3)), out, header())["batches"] == 3


def test_the_message_names_pid_host_and_start_time(tmp_path: Path) -> None:
    with FolderLock(tmp_path), pytest.raises(ExportBusyError) as err:
        ShardWriter(tmp_path, header(), mode="overwrite")  # flock conflicts within one process too
    msg = str(err.value)
    assert f"pid {os.getpid()} on {socket.gethostname()}, since 20" in msg and "\n" not in msg
    assert not (tmp_path / ".partial.json").exists()


def test_a_writer_holds_the_lock_until_it_closes(tmp_path: Path) -> None:
    with ShardWriter(tmp_path, header()) as w:
        with pytest.raises(ExportBusyError):
            ShardWriter(tmp_path, header(), mode="resume")
        w.write(make_batch(0))
    ShardWriter(tmp_path, header(), mode="overwrite")  # free again


@pytest.mark.slow  # the lock's holder is another process
def test_cli_export_into_a_busy_folder_is_one_line_and_non_zero(
    books: Path, tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["export", "text", str(books), str(out), "-b", "2", "-t", "4", "-w", "0", "--overwrite"]
    )
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"is being written by another export (pid {holder.pid} on" in text
    assert "Traceback" not in result.output


@pytest.mark.slow  # the lock's holder is another process
def test_ray_export_driver_takes_the_lock(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    pytest.importorskip("ray")
    from streamcli.shards.on_ray import Job, export_on_ray

    job = Job(source={}, loader={}, header=header(), out_dir=str(tmp_path / "out"), epochs=1, total=3)
    with pytest.raises(ExportBusyError, match=f"pid {holder.pid}"):
        export_on_ray(job, mode="overwrite")


def test_a_link_planted_as_the_lock_file_is_refused_and_not_followed(tmp_path: Path) -> None:
    (tmp_path / LOCK).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ShardError, match="cannot lock"):
        FolderLock(tmp_path)
    assert not (tmp_path / "elsewhere").exists()
