"""Which plugin a bare path implies (issue 46, point 1): what most of the files are, with documentation files
(README*, LICENSE*, *.md...) left out of the vote, and the choice named on stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import data_root
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli._inference import infer_plugin
from streamcli.plugins import list_plugins

runner = CliRunner()
NAMES = [p.name for p in list_plugins()]


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    """Two real clips (links to the shared data) and a README.txt, as a user's folder of clips has."""
    folder = tmp_path / "clips"
    folder.mkdir()
    for name in ("realshort.mp4", "dummy_video.avi"):
        os.symlink(data_root("video") / name, folder / name)
    (folder / "README.txt").write_text("Two clips from the test set. Licences in tests/data/README.md.\n")
    return folder


def test_a_readme_in_a_folder_of_clips_does_not_make_it_text(clips: Path) -> None:
    chosen, why = infer_plugin(str(clips), NAMES)
    assert chosen == "video"
    assert why == f"reading {clips}/ with the video plugin (2 clips; README.txt ignored)"


def test_a_folder_of_books_with_a_readme_is_still_text(tmp_path: Path) -> None:
    books = tmp_path / "books"
    books.mkdir()
    for src in data_root("text").glob("*.txt"):
        os.symlink(src, books / src.name)
    (books / "README.md").write_text("# my corpus\n")
    (books / "LICENSE.txt").write_text("public domain\n")
    chosen, why = infer_plugin(str(books), NAMES)
    assert chosen == "text" and why is not None
    assert "(2 text files;" in why and "README.md" in why and "LICENSE.txt" in why


def test_the_majority_of_media_files_decides(clips: Path) -> None:
    for i in range(3):  # three books beside two clips: a text folder that holds a few clips
        os.symlink(data_root("text") / "tom_sawyer_excerpt.txt", clips / f"book{i}.txt")
    assert infer_plugin(str(clips), NAMES)[0] == "text"


@pytest.mark.slow
def test_preview_of_a_folder_of_clips_says_it_reads_them_as_video(clips: Path) -> None:
    args = ["preview", str(clips), "-b", "2", "-t", "2", "-w", "0", "-s", "size=8x8", "--batches", "1"]
    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert f"reading {clips}/ with the video plugin (2 clips; README.txt ignored)" in out.output
    assert "realshort.mp4" in out.output and "README" not in out.output.split("ignored)", 1)[1]
