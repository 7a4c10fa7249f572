"""Every README example marked runnable (a ```python run fence) runs as written, from the quick start's paths."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```", re.S | re.M)
STREAMCLI = Path(sys.executable).with_name("streamcli")


def blocks() -> list[tuple[str, str, str]]:
    """(language, info words, code) of every fenced block, in order."""
    return [(m[1], m[2].strip(), m[3]) for m in FENCE.finditer(README.read_text())]


def runnable() -> list[str]:
    return [code for lang, info, code in blocks() if lang == "python" and "run" in info.split()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the repository root after the quick start: samples/clips, tests/data/text, out/."""
    root = tmp_path_factory.mktemp("readme")
    (root / "tests" / "data").mkdir(parents=True)
    (root / "tests" / "data" / "text").symlink_to(ROOT / "tests" / "data" / "text")

    def cli(*args: str) -> None:
        run = subprocess.run([str(STREAMCLI), *args], cwd=root, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"streamcli {' '.join(args)}: {run.stderr}"

    cli("samples", "samples/clips", "--count", "3", "--steps", "40")  # what make demo runs, smaller
    cli("export", "video", "samples/clips", "out/", "-b", "4", "-t", "16", "--epochs", "1", "-w", "0")
    return root


def test_the_readme_marks_its_complete_examples_runnable() -> None:
    assert len(runnable()) >= 5
    for lang, info, code in blocks():
        if lang == "python" and "run" not in info.split():
            pytest.fail(f"a python block is not marked runnable (```python run): {code[:80]!r}")


def test_no_example_names_a_folder_the_quick_start_does_not_create() -> None:
    text = README.read_text()
    assert "books/" not in text
    assert re.findall(r"(?<!samples/)\bclips/", text) == [], "clips/ that make demo does not write"


def test_every_example_closes_its_loader() -> None:
    for code in runnable():
        for line in code.splitlines():
            if "StreamLoader(" in line and "def " not in line and "return " not in line and "import" not in line:
                assert line.lstrip().startswith("with "), f"a loader not closed by `with`: {line.strip()}"


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(runnable())))
def test_readme_example_runs_as_written(index: int, quickstart: Path) -> None:
    script = quickstart / f"example_{index}.py"
    script.write_text(runnable()[index])
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
    run = subprocess.run(
        [sys.executable, script.name], cwd=quickstart, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"README example {index} failed:\n{runnable()[index]}\n{run.stderr[-3000:]}"
