"""``streamcli inspect --batch K --json``: exactly the K-th batch a loader with the same options hands out, on
real clips and on an export folder; bad input is a one-line usage error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_shared, shared_data
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app
from streamcli.inspection import batch_record

runner = CliRunner()
CLIPS = ("realshort.mp4", "homer.avi", "Effet_force_magnetique.ogv", "bikes.mp4")
OPTS = ["-s", "size=24x32", "-s", "scan=true", "-b", "3", "-t", "4", "--seed", "2"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = shared_data("video")
    if shared is None:
        pytest.skip("needs the shared clips")
    folder = tmp_path_factory.mktemp("clips")
    for name in CLIPS:
        (folder / name).symlink_to(shared / name)
    return folder


def kth(folder: Path, ks: tuple[int, ...], cache: str) -> dict[int, dict[str, Any]]:
    """The records of batches ``ks`` of a plain loader's run (epoch after epoch)."""
    src = load_source("video", str(folder), size=(24, 32), scan=True, cache_dir=cache)
    out: dict[int, dict[str, Any]] = {}
    n = 0
    with StreamLoader(src, 3, 4, seed=2) as loader:
        while n <= max(ks):
            for batch in loader:
                if n in ks:
                    out[n] = batch_record(batch, n, loader.stream_name)
                n += 1
                if n > max(ks):
                    break
    return out


def inspect_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    record: dict[str, Any] = json.loads(result.stdout)
    return record


@pytest.mark.slow
@needs_shared("video")
@pytest.mark.parametrize("workers", ["0", "2"])
def test_batch_k_json_is_the_kth_batch_for_k_0_5_40(clips: Path, video_scans: str, workers: str) -> None:
    want = kth(clips, (0, 5, 40), video_scans)
    for k in (0, 5, 40):
        cache = f"cache_dir={video_scans}"
        got = inspect_json("video", str(clips), *OPTS, "-s", cache, "-w", workers, "--batch", str(k))
        made_by = [r.pop("worker") for r in got["rows"]]  # video's costly steps: balance moves rows, recorded
        assert made_by == ["main"] * 3 if workers == "0" else set(made_by) <= {0, 1}
        assert got == want[k]
        assert got["batch"] == k and len(got["rows"]) == 3 and {"row", "stream", "item"} <= set(got["rows"][0])


@pytest.mark.slow
@needs_shared("video")
def test_batch_k_json_on_an_export_is_its_kth_batch(clips: Path, video_scans: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cache = f"cache_dir={video_scans}"
    args = ["export", "video", str(clips), *OPTS, "-s", cache, "-w", "0", str(out), "--batches=60"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    want = kth(clips, (0, 5, 40), video_scans)
    for k in (0, 5, 40):
        assert inspect_json(str(out), "--batch", str(k)) == want[k]
    result = runner.invoke(app, ["inspect", str(out), "--batch", "100000", "--json"])
    assert result.exit_code == 2 and "--batch 100000" in result.output and "it has" in result.output


def test_a_state_file_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["inspect", "text", "hello world", "-s", "strings=true", "--state", str(bad), "--json"])
    assert result.exit_code != 0 and "--state" in result.output


def test_on_a_pipe_without_json_it_prints_the_batchs_rows_as_a_table() -> None:
    args = ["inspect", "text", "hello world, this is a stream", "-s", "strings=true", "-s", "width=2"]
    result = runner.invoke(app, [*args, "-b", "1", "-t", "4", "-w", "0", "--batch", "2"])
    assert result.exit_code == 0, result.output
    assert "batch 2 (epoch 0, its batch 2)" in result.output
    assert "8..11" in result.output and "1111" in result.output  # positions and valid flags of the one row


def test_an_export_refuses_options_that_need_a_loader(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text("{}")
    result = runner.invoke(app, ["inspect", str(tmp_path), "-s", "size=8", "--json"])
    assert result.exit_code == 2 and "is an export" in result.output and "-s" in result.output
