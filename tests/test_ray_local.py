"""A local Ray instance started for ``--engine ray`` is quiet and goes away with its driver, even after kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # see test_ray_export.py

DRIVER = """
import ray
from streamcli.shards.ray_local import init_local

init_local(ray, num_cpus=1)
assert ray.get(ray.remote(lambda: 7).remote()) == 7
print("ready", flush=True)
input()  # until killed
"""


def _alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {p.name()}")
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_killed_driver_leaves_no_ray_process_and_ray_printed_nothing(tmp_path: Path) -> None:
    err = tmp_path / "stderr"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", err.read_text()
        ray_procs = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(p.name() for p in ray_procs)
        assert "raylet" in names and "gcs_server" in names, names  # the instance this test is about
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10  # Ray's own agents outlived their driver by about a minute
        while _alive(ray_procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _alive(ray_procs)
    finally:
        if proc.poll() is None:
            proc.kill()
    for p in ray_procs:  # never leave them behind for the next test, whatever was found
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    assert not left, f"still running 10 s after kill -9 of the driver: {left}"
    assert err.read_text().strip() == "", err.read_text()  # no INFO or WARNING lines of Ray's own


def test_the_ray_progress_bar_counts_megabytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar counts what the tasks wrote, as the local bar does (it said "0 MB" throughout)."""
    from typer.testing import CliRunner

    import streamcli.shards.on_ray as on_ray
    from streamcli.cli import app

    def fake(job: on_ray.Job, **kw: object) -> dict[str, object]:
        progress = kw["progress"]
        assert callable(progress)
        progress(job.total, job.total)  # every shard on disk
        raise KeyboardInterrupt  # no Ray started: the bar's last frame is what this test reads

    monkeypatch.setattr(on_ray, "export_on_ray", fake)
    args = ["camera", "-s", "count=2", "-s", "steps=32", "-s", "size=128x128", "-b", "2", "-t", "4", "-w", "0"]
    result = CliRunner().invoke(app, ["export", *args, str(tmp_path / "out"), "--engine", "ray"])
    assert result.exit_code == 130, result.output
    bar = next(ln for ln in result.output.splitlines() if "batches" in ln and "MB" in ln)
    assert " 8/8 batches 3.2 MB" in bar, bar  # 8 batches of 2 x 4 frames of 3 x 128 x 128 bytes, and their flags
