"""A plugin's failures, as a new user meets them (issue 46, point 8): a bug in its constructor is a plugin error
(exit 1) with the traceback under --debug; an error while reading names the item's file and the fix;
``--on-error skip`` says what it skipped, on stderr and in ``loader.stats.skips``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import data_root
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli.cli import app
from streamcli.errors import SourceError
from streamcli.plugins import load_source

runner = CliRunner()

PLUGIN = textwrap.dedent(
    '''
    from pathlib import Path

    import numpy as np

    from streamcli.source import BaseSource, Field


    class Lines(BaseSource):
        """The first 8 bytes of each .txt file of a folder; fail= makes it fail on purpose."""

        def __init__(self, folder: str, fail: str = "") -> None:
            self.folder, self.fail = str(folder), fail
            if fail == "init-bug":
                self.width = None + 1  # a bug in the plugin: TypeError
            if fail == "init-value":
                raise ValueError(f"{folder}: no settings.toml in it; add one")

        def items(self):
            return sorted(str(p) for p in Path(self.folder).glob("*.txt"))

        def item_name(self, item):
            return Path(item).name

        def fields(self):
            return [Field("byte", (), "uint8")]

        def length(self, item):
            return 8

        def open(self, item, start=0):
            data = Path(item).read_bytes()[:8]
            for k in range(start, 8):
                if self.fail == "open" and "fortunes" in item and k == 3:
                    raise RuntimeError("bad header")
                yield {"byte": np.uint8(data[k])}
    '''
)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path]:
    (tmp_path / "lines_plugin.py").write_text(PLUGIN)
    books = tmp_path / "books"
    books.mkdir()
    for src in data_root("text").glob("*.txt"):
        os.symlink(src, books / src.name)
    return f"{tmp_path / 'lines_plugin.py'}:Lines", books


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "streamcli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, "COLUMNS": "200"})


PREVIEW = ("-b", "2", "-t", "4", "-w", "0", "--batches", "10")


def test_a_bug_in_a_plugins_constructor_is_a_plugin_error_with_exit_1(setup: tuple[str, Path]) -> None:
    plugin, books = setup
    out = runner.invoke(app, ["preview", plugin, str(books), "-s", "fail=init-bug", *PREVIEW])
    assert out.exit_code == 1, out.output
    assert "TypeError" in out.output and "error in the plugin" in out.output and "--debug" in out.output
    assert "Traceback" not in out.output


def test_a_bad_value_a_constructor_refuses_stays_a_usage_error(setup: tuple[str, Path]) -> None:
    plugin, books = setup
    out = runner.invoke(app, ["preview", plugin, str(books), "-s", "fail=init-value", *PREVIEW])
    assert out.exit_code == 2, out.output
    assert "no settings.toml in it" in out.output


@pytest.mark.slow
@pytest.mark.parametrize(("fail", "code", "line"), [("init-bug", 1, "None + 1"), ("init-value", 2, "raise ValueError")])
def test_debug_prints_the_plugins_traceback_from_its_constructor(
    setup: tuple[str, Path], fail: str, code: int, line: str
) -> None:
    plugin, books = setup
    out = cli("--debug", "preview", plugin, str(books), "-s", f"fail={fail}", *PREVIEW)
    assert out.returncode == code, out.stderr
    assert "Traceback" in out.stderr and line in out.stderr and "lines_plugin.py" in out.stderr, out.stderr


def test_a_plugins_error_while_reading_names_the_file_and_the_fix(setup: tuple[str, Path]) -> None:
    plugin, books = setup
    fortunes = str(books / "fortunes_literature.txt")
    with pytest.raises(SourceError) as caught:
        with StreamLoader(load_source(plugin, str(books), fail="open"), 2, 4) as loader:
            list(loader)
    assert fortunes in str(caught.value) and "on_error='skip'" in str(caught.value)
    out = runner.invoke(app, ["preview", plugin, str(books), "-s", "fail=open", *PREVIEW])
    assert out.exit_code == 1, out.output
    line = out.output.strip().splitlines()[-1]
    assert line.startswith("error: ") and "'fortunes_literature.txt'" in line and fortunes in line, line
    assert "--on-error skip" in line and "--debug" in line and "RuntimeError: bad header" in line, line


def test_on_error_skip_says_what_it_skipped(setup: tuple[str, Path]) -> None:
    plugin, books = setup
    fortunes = str(books / "fortunes_literature.txt")
    with StreamLoader(load_source(plugin, str(books), fail="open"), 2, 4, on_error="skip") as loader:
        list(loader)
        assert loader.stats.skipped == 1
        assert len(loader.stats.skips) == 1 and fortunes in loader.stats.skips[0], loader.stats.skips
        assert "at step 3" in loader.stats.skips[0] and "bad header" in loader.stats.skips[0]
    out = runner.invoke(app, ["preview", plugin, str(books), "-s", "fail=open", *PREVIEW, "--on-error", "skip"])
    assert out.exit_code == 0, out.output
    said = [ln for ln in out.output.splitlines() if "skipped item" in ln]
    assert len(said) == 1 and fortunes in said[0] and "at step 3" in said[0] and "bad header" in said[0], out.output
