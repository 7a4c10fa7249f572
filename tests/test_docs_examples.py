"""The documentation site (docs/, mkdocs.yml) and the README: every python block runs as written, from a folder laid
out as after the quick start; the reference covers every public name, the CLI page every command.

A python block runs unless its fence says ``no-run`` followed by the reason (```python no-run: needs a GPU):
such blocks are few, and each says why.
"""

from __future__ import annotations

import inspect
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _forkrun import ForkRunner

import streamcli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```", re.S | re.M)
STREAMCLI = Path(sys.executable).with_name("streamcli")
# On one pytest-xdist worker (make test: --dist loadgroup): the module's fixtures (the quick start's folder, the
# fork server) are made once, not once per worker.
pytestmark = pytest.mark.xdist_group("docs")


def blocks() -> list[tuple[Path, str, str, str]]:
    """(page, language, info words, code) of every fenced block of every page, in order."""
    return [(page, m[1], m[2].strip(), m[3]) for page in PAGES for m in FENCE.finditer(page.read_text())]


def runnable() -> list[tuple[str, str]]:
    """(a name for the test id, code) of every python block not marked no-run."""
    out, count = [], dict.fromkeys(PAGES, 0)
    for page, lang, info, code in blocks():
        if lang == "python" and not info.startswith("no-run"):
            count[page] += 1
            out.append((f"{page.stem}-{count[page]}", code))
    return out


def block_with(text: str) -> str:
    """The one runnable block that contains ``text``."""
    found = [code for _, code in runnable() if text in code]
    assert len(found) == 1, f"{len(found)} runnable blocks contain {text!r}"
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STREAMCLI), *args], cwd=root, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the repository root after the quick start: samples/clips, tests/data/text, out/."""
    root = tmp_path_factory.mktemp("docs")
    (root / "tests" / "data").mkdir(parents=True)
    (root / "tests" / "data" / "text").symlink_to(ROOT / "tests" / "data" / "text")
    run = _cli(root, "samples", "samples", "--count", "3", "--steps", "40")  # the quick start's line, smaller
    assert run.returncode == 0, f"streamcli samples samples: {run.stderr}"
    if not (root / "samples" / "clips").is_dir():  # a samples command that writes the clips into its folder
        run = _cli(root, "samples", "samples/clips", "--count", "3", "--steps", "40")
        assert run.returncode == 0, f"streamcli samples samples/clips: {run.stderr}"
    run = _cli(root, "export", "video", "samples/clips", "out/", "-b", "4", "-t", "16", "--epochs", "1", "-w", "0")
    assert run.returncode == 0, f"streamcli export: {run.stderr}"
    return root


def _tail(stderr: str) -> str:
    """The start (a worker's own traceback comes first) and the end of a failed script's stderr."""
    return stderr if len(stderr) <= 6000 else f"{stderr[:3000]}\n[...]\n{stderr[-3000:]}"


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkRunner]:
    """Each block runs in a process of its own, forked from one that has imported torch, numpy and streamcli."""
    runner = ForkRunner()
    yield runner
    runner.close()


def run_block(code: str, where: Path, name: str, forks: ForkRunner) -> subprocess.CompletedProcess[str]:
    script = where / f"example_{name}.py"
    script.write_text(code)
    env = {
        **os.environ,
        # the DDP example as `torchrun --nproc-per-node 1` would start it
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "CUDA_VISIBLE_DEVICES": "",
    }
    return forks.run(script, where, env, timeout=300)


# ---------------------------------------------------------------------------------------------- the blocks


def test_the_site_has_its_examples_and_marks_every_skipped_one_with_a_reason() -> None:
    assert len(runnable()) >= 15
    skipped = [(page, info) for page, lang, info, _ in blocks() if lang == "python" and info.startswith("no-run")]
    assert len(skipped) <= 3, f"too many python blocks that never run: {skipped}"
    for page, info in skipped:
        assert len(info.removeprefix("no-run").strip(" :")) >= 8, f"{page.name}: no-run without a reason: {info!r}"


def test_no_example_names_a_folder_the_quick_start_does_not_create() -> None:
    for page in PAGES:
        text = page.read_text()
        assert "books/" not in text, page.name
        assert re.findall(r"(?<!samples/)\bclips/", text) == [], (
            f"{page.name}: clips/ that the quick start does not write"
        )


def test_every_example_closes_its_loader() -> None:
    for name, code in runnable():
        for line in code.splitlines():
            if "StreamLoader(" in line and "def " not in line and "return " not in line and "import" not in line:
                stripped = line.lstrip()
                assert stripped.startswith("with ") or 'transform="crop=abc"' in stripped, (
                    f"{name}: a loader not closed by `with`: {stripped}"
                )


@pytest.mark.slow
@pytest.mark.parametrize(("name", "code"), runnable(), ids=[name for name, _ in runnable()])
def test_docs_example_runs_as_written(name: str, code: str, quickstart: Path, forks: ForkRunner) -> None:
    run = run_block(code, quickstart, name, forks)
    assert run.returncode == 0, f"{name} failed:\n{code}\n{_tail(run.stderr)}"


# -------------------------------------------------------------------- the README's five false claims, fixed

WRONG = {
    'make_header(compress="zstd", level=3)': "make_header needs the fields, sizes, layout, records and shard size",
    "`ShardWriter(url)`": "ShardWriter needs the header too",
    "A bad transform raises\n`TransformError`": "the failure modes are spelled out",
    "refused with a `ValueError` naming the difference": "a refused state is a StateError",
    "every path may be a URL": "the events source and events-from-video take local paths",
}


def test_the_false_claims_are_gone() -> None:
    for page in PAGES:
        text = page.read_text()
        for wrong, why in WRONG.items():
            assert wrong.lower() not in text.lower(), f"{page.name} still says {wrong!r} ({why})"


def test_the_corrected_claims_are_stated() -> None:
    export = (DOCS / "export.md").read_text()
    assert "ShardWriter(url, header)" in export
    assert "the `events` source\nrefuses a URL" in export
    assert "events-from-video` writes its recordings to a local folder" in export
    assert "a `StateError` naming the difference" in (DOCS / "training.md").read_text()
    assert "stops the epoch with a `TransformError`" in (DOCS / "mixing.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    "marker", ["make_header(", "except TransformError", "except StateError", "UnsupportedURLError"]
)
def test_the_corrected_claim_runs(marker: str, tmp_path: Path, forks: ForkRunner) -> None:
    """make_header with every argument and ShardWriter(out, header); the transform failures; StateError; a URL to
    the events source: each block runs and prints what the page says it does."""
    code = block_with(marker)
    run = run_block(code, tmp_path, re.sub(r"\W", "_", marker), forks)
    assert run.returncode == 0, f"{code}\n{_tail(run.stderr)}"
    expect = {
        "make_header(": "verified",
        "except TransformError": "transform broken failed",
        "except StateError": "time_steps",
        "UnsupportedURLError": "local files only",
    }[marker]
    assert expect in run.stdout, run.stdout


@pytest.mark.slow
def test_events_from_video_refuses_a_url_for_its_output(tmp_path: Path) -> None:
    """The storage page says events-from-video writes to a local folder: a URL must not become a folder 's3:'."""
    run = _cli(tmp_path, "events-from-video", "camera", "s3://bucket/events")
    assert not (tmp_path / "s3:").exists(), "the URL was taken for a local folder named 's3:'"
    assert run.returncode == 2 and "is a URL" in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------ the reference


def test_every_public_name_is_in_the_reference() -> None:
    reference = (DOCS / "reference.md").read_text()
    missing = [name for name in streamcli.__all__ if f"::: streamcli.{name}\n" not in reference]
    assert not missing, f"docs/reference.md lacks ::: streamcli.NAME for {missing}"


def test_every_loader_parameter_is_documented() -> None:
    doc = inspect.getdoc(streamcli.StreamLoader) or ""
    params = [p for p in inspect.signature(streamcli.StreamLoader.__init__).parameters if p != "self"]
    assert len(params) >= 20
    missing = [p for p in params if not re.search(rf"^    {p}: \S", doc, re.M)]
    assert not missing, f"StreamLoader's docstring has no Args entry for {missing}"


def test_every_command_is_on_the_cli_page() -> None:
    import typer

    from streamcli.cli import app

    page = (DOCS / "cli.md").read_text()
    assert ":module: streamcli_docs_hooks" in page and ":command: command" in page  # the generated reference
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert len(commands) >= 8
    for name in commands:
        assert f"`streamcli {name}" in page, f"docs/cli.md's guide does not mention streamcli {name}"


def test_the_nav_has_every_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.glob("*.md"):
        assert f": {page.name}\n" in nav, f"mkdocs.yml's nav lacks {page.name}"
    for page in ("migrating.md", "troubleshooting.md", "changelog.md", "reference.md", "cli.md"):
        assert (DOCS / page).is_file(), page


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    for want in ("pip install streamcli", "make demo", "make test", "docs/index.md", "StreamLoader("):
        assert want in readme, want
