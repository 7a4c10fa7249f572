"""The share of real steps is shown everywhere, with a hint naming the cause and the fix when it is low."""

from __future__ import annotations

from pathlib import Path

from conftest import data_root
from typer.testing import CliRunner

from streamcli.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200", "LINES": "50"}


def test_export_summary_shows_the_share_and_a_hint(tmp_path: Path) -> None:
    books = str(data_root("text"))  # 2 books for 8 rows: mostly padding
    r = runner.invoke(app, ["export", "text", books, str(tmp_path / "a"), "-b", "8", "-t", "16", "-w", "0"], env=WIDE)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # lines wrap wherever their figures make them long
    assert "of the steps are real data" in text and "hint:" in text and "--segment" in text
    args = ["export", "text", books, str(tmp_path / "b"), "-b", "8", "-t", "16", "-w", "0", "--segment", "64"]
    r = runner.invoke(app, args, env=WIDE)
    assert r.exit_code == 0, r.output
    assert "hint:" not in r.output
    text = " ".join(r.output.split())
    share = int(text.split("% of the steps are real data")[0].rsplit(" ", 1)[-1])
    assert share > 80


def test_bench_has_a_real_steps_column_and_preview_a_real_data_row() -> None:
    books = str(data_root("text"))
    r = runner.invoke(
        app, ["bench", "text", books, "-w", "0", "--batches", "20", "--repeats", "1", "-b", "16"], env=WIDE
    )
    assert r.exit_code == 0, r.output
    assert "real steps" in r.output and "hint:" in r.output
    r = runner.invoke(app, ["preview", "text", books, "-w", "0", "--batches", "5", "-b", "2"], env=WIDE)
    assert r.exit_code == 0, r.output
    assert "real data" in r.output
