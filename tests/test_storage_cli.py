"""``streamcli export``, ``verify`` and ``replay`` on ``s3://`` URLs (moto's S3 server), a killed export included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.storage.remote import Remote

runner = CliRunner()
BIN = Path(sys.executable).parent / "streamcli"
TEXT = Path(__file__).resolve().parent / "data" / "text"


def objects(url: str) -> dict[str, bytes]:
    r = Remote(url)
    return {n: r.read(n) for n in sorted(r.listing())}


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_export_verify_and_replay_an_s3_url(tmp_path: Path, bucket: str) -> None:
    args = ["export", "text", str(TEXT), "-b", "3", "-t", "16", "-w", "0", "--shard-size", "20kB"]
    assert runner.invoke(app, [*args, str(tmp_path / "run")]).exit_code == 0
    result = runner.invoke(app, [*args, f"{bucket}/run"])
    assert result.exit_code == 0, result.output
    assert f"to {bucket}/run" in result.output
    assert objects(f"{bucket}/run") == files(tmp_path / "run")
    result = runner.invoke(app, ["verify", f"{bucket}/run"])
    assert result.exit_code == 0 and result.output.startswith("ok:"), result.output
    result = runner.invoke(app, ["replay", f"{bucket}/run", "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    assert s["ok"] and s["batches"] == json.loads((tmp_path / "run" / "index.json").read_text())["batches"]
    result = runner.invoke(app, [*args, f"{bucket}/run"])
    assert result.exit_code == 2 and "is not empty" in result.output  # as a local folder
    result = runner.invoke(app, ["export", "shards", f"{bucket}/run", str(tmp_path / "again"), "-w", "0"])
    assert result.exit_code == 0, result.output  # the shards source reads the export at the URL


def test_a_source_given_as_a_url_exports_what_the_local_folder_exports(tmp_path: Path, bucket: str) -> None:
    r = Remote(f"{bucket}/books")
    for p in sorted(TEXT.iterdir()):
        r.write(p.name, p.read_bytes())
    args = ["-b", "3", "-t", "16", "-w", "0", "--batches", "6"]
    assert runner.invoke(app, ["export", "text", str(TEXT), str(tmp_path / "a"), *args]).exit_code == 0
    result = runner.invoke(app, ["export", "text", f"{bucket}/books", str(tmp_path / "b"), *args])
    assert result.exit_code == 0, result.output
    shards = sorted(p.name for p in (tmp_path / "a").glob("shard-*"))
    assert shards and all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in shards)
    result = runner.invoke(app, ["export", f"{bucket}/books", str(tmp_path / "c"), *args])
    assert result.exit_code == 2 and "name the source of a URL" in result.output, result.output


def test_an_export_to_a_missing_bucket_fails_in_one_line_naming_it(moto_s3: object) -> None:
    result = runner.invoke(app, ["export", "text", str(TEXT), "s3://no-such-bucket-here/run", "-w", "0"])
    assert result.exit_code == 1, result.output
    assert "'s3://no-such-bucket-here/run/.streamcli.lock' failed" in result.output
    assert "bucket does not exist" in result.output and "Traceback" not in result.output


def test_replay_of_an_interrupted_s3_export_hints_at_resume(bucket: str) -> None:
    Remote(f"{bucket}/cut").write(".partial.json", b"{}")
    result = runner.invoke(app, ["replay", f"{bucket}/cut"])
    assert result.exit_code == 1 and "rerun it with --resume" in result.output, result.output
    result = runner.invoke(app, ["verify", f"{bucket}/cut"])
    assert result.exit_code == 1 and "index.json' does not exist" in result.output, result.output


@pytest.mark.slow
def test_an_s3_export_killed_then_resumed_is_byte_identical_to_an_uninterrupted_one(
    tmp_path: Path, bucket: str
) -> None:
    args = [
        "camera", "-s", "size=64x64", "-s", "steps=96", "-s", "count=8", "-b", "4", "-t", "8", "-w", "0",
        "--shard-size", "300kB", "--epochs", "3",
    ]  # fmt: skip
    full, cut = tmp_path / "full", f"{bucket}/cut"
    assert runner.invoke(app, ["export", *args, str(full)]).exit_code == 0
    n_full = len(json.loads((full / "index.json").read_text())["shards"])
    proc = subprocess.Popen([str(BIN), "export", *args, cut], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    remote = Remote(cut)
    deadline = time.monotonic() + 60
    while "shard-00002.npz" not in remote.listing() and time.monotonic() < deadline:
        time.sleep(0.05)  # each look is a request to the server, which runs in this process
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    left = remote.listing()
    assert "index.json" not in left, "the export finished before it could be killed"
    assert ".streamcli.lock" in left  # the killed export's lock object: stale, since its process is dead
    assert 0 < len([n for n in left if n.startswith("shard-")]) < n_full
    result = runner.invoke(app, ["export", *args, cut, "--resume"])
    assert result.exit_code == 0, result.output
    assert "resumed: kept" in result.output
    assert objects(cut) == files(full)
    assert runner.invoke(app, ["verify", cut]).exit_code == 0
