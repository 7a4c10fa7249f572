"""A user's own plugin, as written in a hurry: no docstring, a required path, a required keyword option.

``plugins NAME`` describes it without borrowing ``BaseSource``'s docstring, and a source built without what it
requires is a ``PluginArgumentError`` naming the argument and how to pass it; the CLI exits 2 with one line.
"""

from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

import streamcli.plugins as plugins_mod
from streamcli.cli import app
from streamcli.errors import PluginArgumentError, PluginLoadError
from streamcli.plugins import load_source

runner = CliRunner()

PLUGIN = textwrap.dedent(
    """
    from collections.abc import Iterator

    import numpy as np

    from streamcli import BaseSource, Field


    class LinesSource(BaseSource):
        def __init__(self, path: str, *, width: int = 8) -> None:
            self.path, self.width = path, width

        def items(self) -> list[str]:
            return [self.path]

        def fields(self) -> list[Field]:
            return [Field("line", (self.width,), "uint8")]

        def open(self, item: str, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
            for _ in range(start, 5):
                yield {"line": np.zeros(self.width, np.uint8)}


    class GridSource(LinesSource):
        def __init__(self, path: str = "grid", *, width: int, height: int) -> None:
            super().__init__(path, width=width)
    """
)


@pytest.fixture
def user_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lines`` and ``grid`` from a module of the user's (``user_lines``, no docstrings), next to the real ones;
    ``described`` is a class without one in a module that has one."""
    (tmp_path / "user_lines.py").write_text(PLUGIN)
    (tmp_path / "user_described.py").write_text('"""Lines of a log file, one stream per file."""\n'
                                               "from user_lines import LinesSource\n\n\n"
                                               "class Source(LinesSource):\n    pass\n")  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    real = plugins_mod._entry_points

    def eps() -> list[EntryPoint]:
        mine = [
            EntryPoint(name="lines", value="user_lines:LinesSource", group=plugins_mod.GROUP),
            EntryPoint(name="grid", value="user_lines:GridSource", group=plugins_mod.GROUP),
            EntryPoint(name="described", value="user_described:Source", group=plugins_mod.GROUP),
        ]
        return sorted([*real(), *mine], key=lambda e: e.name)

    monkeypatch.setattr(plugins_mod, "_entry_points", eps)


def one_error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "Traceback" not in output and "__init__" not in output
    return lines[0]


def test_a_plugin_without_a_docstring_is_not_described_by_the_base_class(user_plugins: None) -> None:
    result = runner.invoke(app, ["plugins", "lines"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "no description" in first and "base class" not in result.output, first
    assert "width" in result.output  # its options are still listed


def test_a_plugin_without_a_docstring_is_described_by_its_module_when_that_has_one(user_plugins: None) -> None:
    result = runner.invoke(app, ["plugins", "described", "--json"])
    assert result.exit_code == 0, result.output
    assert '"doc": "Lines of a log file, one stream per file."' in result.output


def test_load_source_names_what_the_constructor_lacks_or_cannot_take(user_plugins: None) -> None:
    with pytest.raises(PluginArgumentError, match=r"the lines source needs 'path' \(its first argument\)") as info:
        load_source("lines")
    assert isinstance(info.value, PluginLoadError) and isinstance(info.value, TypeError)  # callers catching either
    assert info.value.missing == ("path",) and info.value.argument == "path"
    with pytest.raises(PluginArgumentError, match=r"needs 'height' \(pass height=\.\.\.\)") as kw:
        load_source("grid", width=3)
    assert kw.value.argument is None
    with pytest.raises(PluginArgumentError, match="has no argument 'colour'; its arguments: path, width"):
        load_source("lines", "x", colour="red")
    assert load_source("lines", "x", width=2).fields()[0].shape == (2,)


def test_bench_without_the_plugins_path_exits_2_naming_it(user_plugins: None) -> None:
    result = runner.invoke(app, ["bench", "lines", "-w", "0", "--batches", "1", "--repeats", "1"])
    assert result.exit_code == 2, result.output
    line = one_error_line(result.output)
    assert "'path'" in line and "lines PATH" in line, line


def test_a_missing_required_option_exits_2_naming_the_o_flag(user_plugins: None) -> None:
    result = runner.invoke(app, ["preview", "grid", "-s", "width=3", "--batches", "1", "-w", "0"])
    assert result.exit_code == 2, result.output
    assert "-s height=VALUE" in one_error_line(result.output)
