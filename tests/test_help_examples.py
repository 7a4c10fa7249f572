"""Every example in every command's ``--help`` runs as written in a folder where ``streamcli samples samples`` ran.

Left out: the interactive ``streamcli preview`` (a live view until q), Ray and ``s3://`` examples (they need a
cluster or a bucket). Long runs get a ``--batches`` cap and ``-w 0`` appended (the last value given wins), and
the examples run in this process (CliRunner): starting Python and torch for each would cost more than the runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from streamcli.cli import app

pytestmark = pytest.mark.slow

ORDER = (
    "samples", "export", "verify", "replay", "inspect", "events-from-video", "preview", "bench", "plugins", "index"
)  # fmt: skip
"""Commands in the order their examples run: an export before verify reads it, event files before preview."""
CAPS = {
    "preview": ["--batches", "3", "-w", "0"],
    "export": ["--batches", "2", "-w", "0"],
    "bench": ["--batches", "2", "--warmup", "0", "--repeats", "1"],
    "inspect": ["-w", "0"],  # (on a pipe it prints the batch and exits: no app)
}


def help_examples() -> dict[str, list[str]]:
    """Each command's examples, read from the epilog its ``--help`` prints."""
    group = typer.main.get_command(app)
    out: dict[str, list[str]] = {}
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        text = (command.epilog or "").replace("\\[", "[")
        text = text.split(":", 1)[1] if text.startswith(("Example:", "Examples:")) else text
        out[name] = [e.strip() for e in text.split("  |  ") if e.strip()]
    return out


def skipped(example: str) -> str | None:
    """Why an example is not run here, or None."""
    if example.strip() == "streamcli preview":
        return "interactive"
    if "--engine ray" in example:
        return "needs Ray"
    if "s3://" in example:
        return "needs a bucket"
    return None


def test_every_command_has_examples_and_each_names_the_command() -> None:
    examples = help_examples()
    assert set(examples) == set(ORDER)
    for name, lines in examples.items():
        assert lines, f"streamcli {name} --help has no example"
        for line in lines:
            assert line.startswith("streamcli "), line


def test_examples_use_only_what_samples_writes() -> None:
    """No example points at a folder that ``streamcli samples samples`` does not write, nor at a plugin that
    ships in another package."""
    for lines in help_examples().values():
        for line in lines:
            words = shlex.split(line)
            for w in words:
                for folder in ("clips/", "books/", "src/", "text/", "audio/"):
                    if w.startswith(folder):
                        pytest.fail(f"{line!r}: {w!r} is not under samples/")
            assert "sine" not in words, f"{line!r} names the sine plugin, a separate package"


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where ``streamcli samples samples`` ran (with short clips, so the examples stay quick)."""
    root = tmp_path_factory.mktemp("examples")
    r = CliRunner().invoke(app, ["samples", str(root / "samples"), "--steps", "48", "-q"])
    assert r.exit_code == 0, r.output
    return root


def _runs() -> list[tuple[str, str]]:
    examples = help_examples()
    return [(name, e) for name in ORDER for e in examples.get(name, [])]


def test_every_help_example_runs_as_written(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(sample_dir)
    runner = CliRunner()
    failures = []
    ran = 0
    for name, example in _runs():
        if skipped(example):
            continue
        argv = shlex.split(example)
        assert argv[0] == "streamcli"
        r = runner.invoke(app, [*argv[1:], *CAPS.get(name, [])])
        ran += 1
        if r.exit_code != 0:
            failures.append(f"{example}: exit {r.exit_code}: {r.output.strip()[-400:]}")
    assert not failures, "\n".join(failures)
    assert ran >= 15
