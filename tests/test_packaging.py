"""The wheel a user installs holds the whole library: every module, the data files, the licence, one version."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import streamcli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # Build from a copy: setuptools reuses a checkout's build/ folder, which can hold modules the config misses.
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT / "streamcli", src / "streamcli", ignore=ignore)
    shutil.copytree(ROOT / "plugins" / "streamcli_sources", src / "plugins" / "streamcli_sources", ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("streamcli-*.whl")
    return zipfile.ZipFile(path)


def _tree(package_dir: Path, name: str) -> set[str]:
    return {f"{name}/{p.relative_to(package_dir).as_posix()}" for p in package_dir.rglob("*.py")}


@pytest.mark.slow
def test_the_wheel_holds_every_module_of_the_library_and_the_built_in_sources(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    sources = ROOT / "plugins" / "streamcli_sources"
    expected = _tree(ROOT / "streamcli", "streamcli") | _tree(sources, "streamcli_sources")
    assert expected - names == set()
    assert {"streamcli/py.typed", "streamcli_sources/py.typed", "streamcli_sources/texture.png"} <= names


@pytest.mark.slow
def test_the_wheel_carries_the_licence_the_entry_points_and_the_one_version(wheel: zipfile.ZipFile) -> None:
    info = f"streamcli-{streamcli.__version__}.dist-info"
    names = set(wheel.namelist())
    assert f"{info}/licenses/LICENSE" in names
    metadata = wheel.read(f"{info}/METADATA").decode()
    assert f"Version: {streamcli.__version__}" in metadata
    entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    for plugin in ("text", "video", "camera", "audio", "shards"):
        assert f"{plugin} = streamcli_sources." in entry_points
    assert "streamcli = streamcli.console:main" in entry_points
