"""``streamcli export`` into a folder holding a user's file: the first message names the file and the way out, and
no flag leads on to a progress bar and a refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.storage.remote import Remote

runner = CliRunner()
TINY = ["-b", "2", "-t", "4", "-w", "0"]


def one_red_line(result: Any) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output  # no progress bar before it
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    return lines[0]


def export(books: Path, out: str | Path, *flags: str) -> Any:
    return runner.invoke(app, ["export", "text", str(books), str(out), *TINY, *flags])


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
def test_a_users_file_is_named_in_the_first_message_with_or_without_overwrite(
    books: Path, tmp_path: Path, flags: list[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mynotes.md").write_text("mine")
    result = export(books, out, *flags)
    assert result.exit_code == 2, result.output
    line = one_red_line(result)
    assert "holds 'mynotes.md', which no export wrote" in line
    assert "--overwrite deletes only an export's own files" in line
    assert "pick an empty folder or remove 'mynotes.md'" in line
    assert [p.name for p in out.iterdir()] == ["mynotes.md"] and (out / "mynotes.md").read_text() == "mine"


def test_a_users_file_beside_an_export_is_named_and_the_export_is_kept(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert export(books, out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "notes").mkdir()  # a folder is the user's too
    result = export(books, out, "--overwrite", "--batches", "1")
    assert result.exit_code == 2, result.output
    assert "holds 'notes', which no export wrote" in one_red_line(result)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_the_check_comes_before_the_source_is_opened(
    books: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mynotes.md").write_text("mine")

    def no(*a: object, **k: object) -> None:
        raise AssertionError("the source was resolved before OUT_DIR was checked")

    monkeypatch.setattr("streamcli.cli.cmd_export.resolve_source", no)
    result = export(books, out, "--overwrite")
    assert result.exit_code == 2 and "'mynotes.md'" in one_red_line(result)


def test_overwrite_still_replaces_an_export_that_is_alone_in_its_folder(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert export(books, out).exit_code == 0
    result = export(books, out)
    assert result.exit_code == 2 and "pass --overwrite to replace it" in one_red_line(result)
    result = export(books, out, "--overwrite", "--batches", "1")
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_a_users_object_under_an_export_url_is_named_before_any_work(books: Path, bucket: str) -> None:
    Remote(f"{bucket}/run").write("mynotes.md", b"mine")
    result = export(books, f"{bucket}/run", "--overwrite")
    assert result.exit_code == 2, result.output
    assert "holds 'mynotes.md', which no export wrote" in one_red_line(result)
    assert Remote(f"{bucket}/run").read("mynotes.md") == b"mine"
