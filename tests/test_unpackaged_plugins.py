"""Plugins from the user's own file, not installed (issue 46, point 3): ``module:Class`` (imported with the current
folder on ``sys.path``, as uvicorn does) and ``path/to/file.py:Class``, wherever a plugin name is taken; workers
unpickle the source, whatever the start method; a missing module, file or class is named with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli.cli import app
from streamcli.errors import PluginLoadError, PluginNotFoundError
from streamcli.plugins import load_factory, load_source

runner = CliRunner()

PLUGIN = textwrap.dedent(
    '''
    """Counters: stream i yields i*100, i*100+1, ..."""
    import numpy as np

    from streamcli.source import BaseSource, Field


    class Counts(BaseSource):
        """Counts up, one stream per item.

        Args:
            n: how many streams.
            steps: steps per stream.
        """

        def __init__(self, n: int = 3, steps: int = 5) -> None:
            self.n, self.steps = int(n), int(steps)

        def items(self):
            return list(range(self.n))

        def fields(self):
            return [Field("tok", (), "int64")]

        def open(self, item, start=0):
            for k in range(start, self.steps):
                yield {"tok": np.int64(item * 100 + k)}

        def length(self, item):
            return self.steps
    '''
)


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_counts.py").write_text(PLUGIN)
    return folder


def delivered(source: object, workers: int, method: str | None = None) -> dict[int, list[int]]:
    """Each stream's steps in delivery order: stream id -> tok values."""
    out: dict[int, list[int]] = {}
    how = {"mp_context": method} if method else {}
    with StreamLoader(source, batch_size=2, time_steps=3, num_workers=workers, **how) as loader:  # type: ignore[arg-type]
        for batch in loader:
            tok, valid, ids = batch["tok"].numpy(), batch.valid.numpy(), batch.stream.numpy()
            for t in range(tok.shape[0]):
                for b in range(tok.shape[1]):
                    if valid[t, b]:
                        out.setdefault(int(ids[t, b]), []).append(int(tok[t, b]))
    return out


EXPECTED = {i: [i * 100 + k for k in range(5)] for i in range(3)}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_class_in_a_file_named_by_path_runs_in_two_workers(plugin_dir: Path, method: str) -> None:
    source = load_source(f"{plugin_dir / 'my_counts.py'}:Counts", 3)
    assert delivered(source, 0) == EXPECTED
    assert delivered(source, 2, method) == EXPECTED  # the workers unpickled a class no installed module holds


@pytest.mark.slow
def test_a_file_whose_name_is_taken_by_another_module_loads_under_a_private_name(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text(PLUGIN)  # "json" is the standard library's
    source = load_source(f"{tmp_path / 'json.py'}:Counts", 3)
    assert type(source).__module__.startswith("streamcli_user_") and type(source).__module__.endswith("_json")
    assert delivered(source, 2, "spawn") == EXPECTED


@pytest.mark.slow
def test_a_module_in_the_current_folder_runs_in_two_workers(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin_dir)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(plugin_dir))])
    monkeypatch.delitem(sys.modules, "my_counts", raising=False)
    source = load_source("my_counts:Counts", 3)
    assert type(source).__module__ == "my_counts"
    assert delivered(source, 2) == EXPECTED


def test_only_a_module_or_a_python_file_then_a_class_reads_as_a_reference() -> None:
    from streamcli.plugin_refs import is_reference

    for name in ("my_counts:Counts", "pkg.sub:Source", "a/b.py:Counts", "b.py:Outer.Inner", "./src/x.py:X"):
        assert is_reference(name), name
    for name in ("video", "s3://bucket/x.py:X", "books=1:text", "my_counts:", ":Counts", "a:b-c", "C:x y"):
        assert not is_reference(name), name


def test_errors_name_the_module_the_file_or_the_class_with_the_fix(plugin_dir: Path) -> None:
    with pytest.raises(PluginNotFoundError, match=r"no module named 'no_such_mod_q'.*file\.py:Class"):
        load_factory("no_such_mod_q:Counts")
    with pytest.raises(PluginNotFoundError, match=r"nowhere\.py' does not exist"):
        load_factory(f"{plugin_dir / 'nowhere.py'}:Counts")
    with pytest.raises(PluginNotFoundError, match=r"has no attribute 'Count'.*did you mean 'Counts'"):
        load_factory(f"{plugin_dir / 'my_counts.py'}:Count")
    (plugin_dir / "broken_mod.py").write_text("import no_such_dependency_zz\n")
    with pytest.raises(PluginLoadError, match="no_such_dependency_zz"):  # its own import fails: not "no module"
        load_factory(f"{plugin_dir / 'broken_mod.py'}:X")


def test_plugins_name_shows_the_options_of_a_class_in_a_file(plugin_dir: Path) -> None:
    out = runner.invoke(app, ["plugins", f"{plugin_dir / 'my_counts.py'}:Counts"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "steps per stream" in out.output and "how many streams" in out.output


def test_a_missing_class_on_the_command_line_is_a_usage_error_naming_it(plugin_dir: Path) -> None:
    out = runner.invoke(app, ["preview", f"{plugin_dir / 'my_counts.py'}:Nope", "3", "-w", "0", "--batches", "1"])
    assert out.exit_code == 2, out.output
    assert "has no attribute 'Nope'; its classes: Counts" in out.output  # its own, not BaseSource it imported


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -P: the current folder is not put on sys.path by Python itself, as with the installed streamcli script
    cmd = [sys.executable, "-P", "-m", "streamcli", *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["my_counts:Counts", "mine/my_counts.py:Counts"])
def test_preview_takes_a_module_or_a_file_with_two_workers(plugin_dir: Path, name: str) -> None:
    cwd = plugin_dir if ":" in name and "/" not in name else plugin_dir.parent
    out = cli("preview", name, "3", "-b", "3", "-t", "5", "-w", "2", "--batches", "1", cwd=cwd)
    assert out.returncode == 0, out.stderr
    for value in ("4", "104", "204"):  # the last step of each of the three streams
        assert value in out.stdout, out.stdout
    np.testing.assert_equal(out.stderr.count("Traceback"), 0)
