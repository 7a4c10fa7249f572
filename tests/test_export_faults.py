"""Export faults (issue 46 §14): a loader that handed out batches, or a closed one, is refused before anything is
written; a second ``--overwrite`` export waits on the first's lock; with ``--json`` every failing command prints one
JSON error object on stdout; a folder that holds no export is a data error (exit 1) for verify and replay alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from _sources import CountingSource
from typer.testing import CliRunner

import streamcli
from streamcli import StreamLoader
from streamcli.cli import app
from streamcli.errors import LoaderClosedError, LoaderUsageError

LENGTHS = [60, 45, 80, 33, 71, 52, 64]
runner = CliRunner()


def _loader() -> StreamLoader:
    return StreamLoader(CountingSource(LENGTHS), 3, 4, seed=1)


def test_export_of_a_loader_that_handed_out_batches_is_refused_and_leaves_it_where_it_was(tmp_path: Path) -> None:
    with _loader() as ref:
        want = [b["x"].clone() for b in ref]
    with _loader() as ld:
        it = iter(ld)
        got = [next(it)["x"].clone() for _ in range(3)]
        with pytest.raises(LoaderUsageError, match=r"handed out 3 batches of epoch 0.*new StreamLoader"):
            streamcli.export(ld, tmp_path / "run")
        assert not (tmp_path / "run").exists()
        got += [b["x"].clone() for b in it]  # the same iterator goes on where it was: nothing was reset
    assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_export_of_a_closed_loader_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    ld = _loader()
    ld.close()
    with pytest.raises(LoaderClosedError, match="closed"):
        streamcli.export(ld, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    (tmp_path / "there").mkdir()
    with pytest.raises(LoaderClosedError):
        streamcli.export(ld, tmp_path / "there")
    assert list((tmp_path / "there").iterdir()) == []


@pytest.mark.slow  # the first export is another process
def test_a_second_overwrite_export_while_the_first_writes_fails_on_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["export", "camera", str(out), "-b", "2", "-t", "4", "-w", "0", "-s", "size=32x32", "--overwrite"]
    code = "import sys; from streamcli.cli import main; sys.argv = ['streamcli', *sys.argv[1:]]; main()"
    first = subprocess.Popen([sys.executable, "-c", code, *args, "--batches", "100000"], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / ".partial.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (out / ".partial.json").exists(), "the first export did not start"
        r = runner.invoke(app, [*args, "--batches", "4", "--json"])
        assert first.poll() is None, "the first export ended before the second ran"
        assert r.exit_code == 1, r.output
        err = json.loads(r.stdout)
        assert err["kind"] == "ExportBusyError" and f"pid {first.pid}" in err["error"]
        assert (out / ".partial.json").exists() and not (out / "index.json").exists()  # the first's, untouched
    finally:
        first.kill()
        first.wait()


def _json_error(args: list[str], code: int) -> dict[str, Any]:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == code, r.output
    got: dict[str, Any] = json.loads(r.stdout)  # one JSON object on stdout, nothing else there
    assert set(got) >= {"error", "kind", "exit"} and got["exit"] == code and got["error"]
    return got


def test_with_json_a_failing_command_prints_one_json_error_object(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "empty").mkdir()
    got = _json_error(["export", "camera", str(tmp_path / "file")], 2)
    assert got["kind"] == "usage" and "is not a folder" in got["error"]
    got = _json_error(["index", "text", str(tmp_path / "nothing-here")], 2)
    assert "nothing-here" in got["error"]
    got = _json_error(["replay", str(tmp_path / "empty")], 1)
    assert got["kind"] == "ShardError" and "no index.json" in got["error"]
    got = _json_error(["verify", str(tmp_path / "nothing-here")], 2)
    assert got["kind"] == "usage" and "does not exist" in got["error"]
    got = _json_error(["plugins", "no-such-plugin"], 2)
    assert "no-such-plugin" in got["error"]


def test_verify_and_replay_of_a_folder_with_no_export_both_exit_1(tmp_path: Path) -> None:
    for command in ("verify", "replay"):
        r = runner.invoke(app, [command, str(tmp_path)])
        assert r.exit_code == 1, (command, r.output)
        assert "index.json" in r.output
    r = runner.invoke(app, ["replay", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "is not a folder" in r.output  # a path that is not there: the command line's
