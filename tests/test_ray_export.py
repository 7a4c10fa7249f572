"""Export on a local Ray cluster (2 CPUs): byte-identical to the local export, resumable, refusals."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import psutil
import pytest
from _wait import wait_until

from streamcli import ShardError, StreamLoader, load_source
from streamcli.shards import make_header
from streamcli.shards.exporting import export_loader
from streamcli.shards.format import PARTIAL
from streamcli.shards.on_ray import Job, export_on_ray, export_range, shard_runs
from streamcli.shards.records import write_partial

# Tests that start Ray run one after another on one pytest-xdist worker (make test: --dist loadgroup): two
# local Ray instances at once would share the machine's cores, and a second ray.init may join the first.
pytestmark = pytest.mark.xdist_group("ray")

SOURCE = {"plugin": "camera", "arg": None, "options": {"count": 5, "steps": 19, "size": (8, 8)}}
LOADER = {"batch_size": 2, "time_steps": 4, "seed": 3, "segment": 6, "epoch_end": "pad", "boundary": "pad"}
EPOCHS = 2


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def job(out: Path) -> Job:
    kw = dict(LOADER)
    B, T = kw.pop("batch_size"), kw.pop("time_steps")
    with StreamLoader(load_source("camera", **SOURCE["options"]), B, T, **kw) as loader:  # type: ignore[arg-type]
        header = make_header(fields=loader.fields, batch_size=B, time_steps=T, layout="TB", source=SOURCE,
                             loader=LOADER, shard_bytes=1, compress=False)  # fmt: skip
        header["batches_per_shard"] = 3
        total = sum(loader.batches_in_epoch(e) for e in range(EPOCHS))
        fingerprint = loader.state_dict()["fingerprint"]
    return Job(source=SOURCE, loader=LOADER, header=header, out_dir=str(out), epochs=EPOCHS, total=total,
               fingerprint=fingerprint)  # fmt: skip


def local(out: Path, j: Job) -> None:
    kw = dict(LOADER)
    B, T = kw.pop("batch_size"), kw.pop("time_steps")
    with StreamLoader(load_source("camera", **SOURCE["options"]), B, T, **kw) as loader:  # type: ignore[arg-type]
        export_loader(loader, out, j.header, epochs=EPOCHS)


def test_a_task_that_sees_other_files_than_the_driver_writes_nothing(tmp_path: Path) -> None:
    """A task rebuilds the source; a file removed after the driver planned the export must not shift the shards."""
    books = tmp_path / "books"
    books.mkdir()
    for i in range(3):
        (books / f"b{i}.txt").write_text(f"book {i} " * 20)
    spec = {"plugin": "text", "arg": str(books), "options": {}}
    loader_kw = {"batch_size": 2, "time_steps": 4}
    with StreamLoader(load_source("text", str(books)), 2, 4) as loader:
        header = make_header(fields=loader.fields, batch_size=2, time_steps=4, layout="TB", source=spec,
                             loader=loader_kw, shard_bytes=1, compress=False)  # fmt: skip
        j = Job(source=spec, loader=loader_kw, header=header, out_dir=str(tmp_path / "out"), epochs=1,
                total=len(loader), fingerprint=loader.state_dict()["fingerprint"])  # fmt: skip
    (books / "b1.txt").unlink()
    (tmp_path / "out").mkdir()
    with pytest.raises(ShardError, match="a Ray task sees another number of items than the driver did"):
        export_range(j, 0, 1)
    assert list((tmp_path / "out").iterdir()) == []


def test_shard_runs_are_contiguous_and_balanced() -> None:
    runs = shard_runs(list(range(10)), 4)
    assert [i for a, b in runs for i in range(a, b)] == list(range(10)) and len(runs) == 4
    assert shard_runs([0, 1, 5, 6, 7], 1) == [(0, 2), (5, 8)]  # a gap always ends a run
    assert shard_runs([], 4) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_export_is_byte_identical_to_local_and_resumes(tmp_path: Path, ray_session: str) -> None:
    a, b = tmp_path / "local", tmp_path / "ray"
    j = job(b)
    local(a, j)
    seen: list[tuple[int, int]] = []
    m = export_on_ray(j, mode="new", partitions=3, progress=lambda n, t: seen.append((n, t)))
    assert files(b) == files(a)
    assert m["batches"] == j.total and seen and seen[-1][0] == j.total
    # A task (or the driver) died: a shard in the middle is missing, the manifest was never written.
    manifest = json.loads((b / "index.json").read_text())
    (b / "index.json").unlink()
    (b / manifest["shards"][1]["name"]).unlink()
    write_partial(b, j.header, [])
    export_on_ray(j, mode="resume", partitions=2)
    assert files(b) == files(a)
    assert not (b / PARTIAL).exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_interrupted_export_on_the_callers_ray_cancels_only_its_unfinished_tasks(
    tmp_path: Path, ray_session: str
) -> None:
    """On a Ray instance the caller started (and keeps: the ray group's shared one), an interruption cancels the
    export's unfinished tasks: no shard appears after it, the finished tasks' results stay intact, and Ray stays
    usable."""
    import time

    import ray

    from streamcli.shards.on_ray import _cancel

    quick = ray.remote(lambda: 7).remote()
    slow = ray.remote(lambda: time.sleep(60)).remote()
    assert ray.get(quick) == 7
    _cancel(ray, [quick, slow])
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(slow, timeout=30)
    assert ray.get(quick) == 7

    source = {"plugin": "camera", "arg": None, "options": {"count": 4, "steps": 2400, "size": (64, 64)}}
    loader_kw = {"batch_size": 2, "time_steps": 4}
    with StreamLoader(load_source("camera", **source["options"]), 2, 4) as loader:  # type: ignore[arg-type]
        header = make_header(fields=loader.fields, batch_size=2, time_steps=4, layout="TB", source=source,
                             loader=loader_kw, shard_bytes=1, compress=False)  # fmt: skip
        header["batches_per_shard"] = 4
        j = Job(source=source, loader=loader_kw, header=header, out_dir=str(tmp_path / "out"), epochs=1,
                total=len(loader), fingerprint=loader.state_dict()["fingerprint"])  # fmt: skip

    def running() -> list[psutil.Process]:  # Ray titles a worker process after the task it runs
        found = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "export_range" in " ".join(p.cmdline()):
                    found.append(p)
        return found

    tasks: list[psutil.Process] = []

    def interrupt(done: int, total: int) -> None:
        tasks.extend(wait_until(running, 60, "the export's tasks to run"))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_on_ray(j, mode="new", partitions=2, progress=interrupt)
    # The cancel kills the processes running the export's tasks (they run on for seconds without it): once
    # they have exited, nothing can write a shard any more; the export stopped short of its end.
    _, alive = psutil.wait_procs(tasks, timeout=30)
    assert not alive, f"cancelled tasks still running: {[p.pid for p in alive]}"
    written = sorted((tmp_path / "out").glob("shard-*.npz"))
    assert len(written) < -(-j.total // 4), "the export finished before it could be interrupted"
    assert (tmp_path / "out" / PARTIAL).exists()
    assert ray.is_initialized() and ray.get(ray.remote(lambda: 1).remote()) == 1


CLI = ["camera", "-s", "count=4", "-s", "steps=15", "-s", "size=8x8", "-b", "2", "-t", "4", "-w", "0",
       "--segment", "5", "--shard-size", "2kB", "--epochs", "2"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cli_engine_ray_writes_the_local_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "streamcli", "export", *CLI, *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=240)

    r = run(str(tmp_path / "local"))
    assert r.returncode == 0, r.stderr
    r = run(str(tmp_path / "ray"), "--engine", "ray", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    assert "Ray ready in" in r.stderr
    assert "INFO" not in r.stderr and "WARNING" not in r.stderr, r.stderr  # Ray's own lines stay off the terminal
    assert files(tmp_path / "ray") == files(tmp_path / "local")


def test_cli_engine_ray_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import streamcli.shards.on_ray as on_ray
    from streamcli.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["export", *CLI, str(tmp_path / "a"), "--partitions", "2"])
    assert r.exit_code == 2 and "--engine ray" in r.output

    def missing() -> None:
        raise ImportError(f"the ray engine needs Ray, which is not installed: {on_ray.RAY_HINT}")

    monkeypatch.setattr(on_ray, "import_ray", missing)
    r = runner.invoke(app, ["export", *CLI, str(tmp_path / "b"), "--engine", "ray"])
    assert r.exit_code == 2 and "pip install 'streamcli[ray]'" in r.output


@pytest.mark.slow
def test_cli_engine_ray_closes_its_own_loader_before_the_tasks_run(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # The driver's loader only plans the export (the tasks build their own): its workers and shared memory must
    # not idle through a long Ray export.
    from conftest import assert_no_leaks
    from typer.testing import CliRunner

    import streamcli.shards.on_ray as on_ray
    from streamcli.cli import app

    seen: list[bool] = []

    def fake(job: Job, **kw: object) -> dict[str, object]:
        assert_no_leaks(set(), timeout=5.0)  # no worker process and no segment of this process left
        seen.append(True)
        raise KeyboardInterrupt  # the driver's way out, as Ctrl-C: nothing else of the export runs

    monkeypatch.setattr(on_ray, "export_on_ray", fake)
    args = ["export", "camera", "-s", "count=4", "-s", "steps=15", "-s", "size=8x8", "-b", "2", "-t", "4", "-w", "2",
            str(tmp_path / "o"), "--engine", "ray"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert seen == [True] and r.exit_code != 0, r.output


def test_cli_engine_ray_needs_lengths(tmp_path: Path) -> None:
    from conftest import data_root
    from typer.testing import CliRunner

    from streamcli.cli import app

    video = data_root("video") / "odd"
    r = CliRunner().invoke(app, ["export", "video", str(video), str(tmp_path / "o"), "--engine", "ray", "-w", "0"])
    assert r.exit_code == 2 and "scan=true" in r.output


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ctrl_c_cancels_the_ray_tasks_and_resume_completes(tmp_path: Path, ray_session: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    args = ["camera", "-s", "count=8", "-s", "steps=400", "-s", "size=32x32", "-b", "4", "-t", "8", "-w", "0",
            "--shard-size", "300kB"]  # fmt: skip
    cmd = [sys.executable, "-m", "streamcli", "export", *args]
    out, ref = tmp_path / "ray", tmp_path / "local"
    proc = subprocess.Popen([*cmd, str(out), "--engine", "ray", "--partitions", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("shard-*.npz")):
            time.sleep(0.1)
        assert list(out.glob("shard-*.npz")), "no shard appeared"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "--resume" in err and not (out / "index.json").exists() and (out / ".partial.json").exists()
    # Ctrl-C on the Ray the export started (above); the resume joins the running one (--address).
    r = subprocess.run([*cmd, str(out), "--engine", "ray", "--partitions", "2", "--resume", "--address", ray_session],
                       capture_output=True, text=True, timeout=240)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert subprocess.run([*cmd, str(ref)], capture_output=True, timeout=240).returncode == 0
    assert files(out) == files(ref)
