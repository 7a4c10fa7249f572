"""Usage errors exit 2 with one line naming the value and the fix, before anything is started or written."""

from __future__ import annotations

import builtins
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from streamcli import ConfigError, LoaderConfig
from streamcli.cli import app
from streamcli.config import WORKERS_PER_CORE, max_workers

runner = CliRunner()
TEXT = Path(__file__).resolve().parent / "data" / "text"
TINY = ["-b", "2", "-t", "2", "-w", "0", "--batches", "1"]


def one_error(output: str) -> str:
    errors = [ln for ln in output.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, output
    assert "Traceback" not in output and "Error:" not in output.replace("error:", ""), output
    return errors[0]


def test_more_workers_than_the_cores_can_run_is_a_config_error_naming_the_limit() -> None:
    limit = max_workers()
    with pytest.raises(ConfigError, match=rf"num_workers={limit + 1} exceeds {limit}.*{WORKERS_PER_CORE} worker"):
        LoaderConfig(limit + 1, 1, num_workers=limit + 1)
    assert LoaderConfig(limit, 1, num_workers=limit).num_workers == limit


def test_preview_with_a_thousand_workers_is_refused_at_once() -> None:
    result = runner.invoke(app, ["preview", "text", str(TEXT), "-b", "1000", "-w", "1000", "-t", "2", "--batches", "1"])
    assert result.exit_code == 2, result.output
    line = one_error(result.output)
    assert "-w/--workers 1000" in line and f"<= {max_workers()}" in line


@pytest.mark.parametrize("seed", [-1, -7])
def test_a_negative_seed_is_a_config_error(seed: int) -> None:
    with pytest.raises(ConfigError, match=rf"seed={seed} must be a non-negative integer"):
        LoaderConfig(2, 2, seed=seed)


def test_export_with_a_negative_seed_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", "text", str(TEXT), str(out), *TINY, "--seed", "-1"])
    assert result.exit_code == 2, result.output
    assert "--seed -1 must be a non-negative integer" in one_error(result.output)
    assert not out.exists() or not any(out.iterdir())


def test_samples_into_an_existing_file_exits_2_and_leaves_it(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    result = runner.invoke(app, ["samples", str(target), "--count", "1", "--steps", "2"])
    assert result.exit_code == 2, result.output
    assert f"OUT_DIR {str(target)!r} is a file, not a folder" in one_error(result.output)
    assert target.read_text() == "mine"


def test_preview_of_a_folder_with_no_index_names_the_folder_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "shard-00000.npz").write_bytes(b"")
    result = runner.invoke(app, ["preview", "shards", str(tmp_path), *TINY])
    assert result.exit_code == 2, result.output
    line = one_error(result.output)
    assert repr(str(tmp_path)) in line and "no index.json" in line and "streamcli export" in line


@pytest.fixture
def denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A text file that the file system refuses to open, as it does for a user without read permission.

    The tests run as root, which chmod cannot lock out, so ``open`` answers for the file system here.
    """
    folder = tmp_path / "books"
    folder.mkdir()
    for f in TEXT.iterdir():
        shutil.copy(f, folder / f.name)
    locked = sorted(folder.iterdir())[0]
    real_open = builtins.open

    def fake_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, Path)) and Path(file) == locked:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    return locked


@pytest.mark.parametrize("named", [True, False], ids=["the file", "its folder"])
def test_an_unreadable_input_file_exits_2_naming_it(denied: Path, named: bool) -> None:
    arg = denied if named else denied.parent
    result = runner.invoke(app, ["preview", "text", str(arg), *TINY])
    assert result.exit_code == 2, result.output
    line = one_error(result.output)
    assert f"cannot read {str(denied)!r}: permission denied" in line and "chmod" in line


def test_a_permission_error_at_run_time_exits_2_naming_the_file(denied: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamcli.cli._sources as sources

    monkeypatch.setattr(sources, "check_readable", lambda path: None)  # as if it became unreadable after the check
    result = runner.invoke(app, ["preview", "text", str(denied.parent), *TINY])
    assert result.exit_code == 2, result.output
    assert f"{str(denied)!r}: permission denied" in one_error(result.output)


def test_bench_refuses_a_bad_worker_count_before_timing_any() -> None:
    args = ["bench", "text", str(TEXT), "-w", "0,1000", "-b", "2", "-t", "2", "--batches", "1", "--repeats", "1"]
    result = runner.invoke(app, [*args, "--warmup", "0"])
    assert result.exit_code == 2, result.output
    assert "-w/--workers 1000" in one_error(result.output)
    assert "run 1/1" not in result.output


def test_export_reads_o_as_a_source_option_before_blaming_the_folder(tmp_path: Path) -> None:
    """``export video DIR -o OUT``: the user meant -o as the output; DIR is their input, not a full OUT_DIR."""
    src = tmp_path / "books"
    shutil.copytree(TEXT, src)
    result = runner.invoke(app, ["export", "text", str(src), "-o", str(tmp_path / "out"), *TINY])
    assert result.exit_code == 2, result.output
    line = one_error(result.output)
    assert "-o/--option is deprecated" in result.output  # the old spelling still works, with a warning
    assert "sets a source option" in line and "OUT_DIR is the last argument" in line
    assert "not empty" not in line


def test_a_full_out_dir_with_no_input_path_says_it_may_be_the_input(tmp_path: Path) -> None:
    src = tmp_path / "books"
    shutil.copytree(TEXT, src)
    result = runner.invoke(app, ["export", "text", str(src), *TINY])
    assert result.exit_code == 2, result.output
    assert "if" in one_error(result.output) and "is your input" in result.output
