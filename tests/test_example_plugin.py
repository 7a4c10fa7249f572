"""The third-party plugin example, installed for real: pip puts it in a fresh folder, and a new interpreter
that sees that folder first must discover it through its entry point and stream from it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamcli import list_plugins

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "streamcli-sine"

CHECK = """
import json, importlib.metadata as md
import numpy as np
from streamcli import list_plugins, load_source
info = {p.name: p for p in list_plugins()}
src = load_source("sine", 3, steps=5, width=4)
steps = [list(src.open(i)) for i in src.items()]
try:
    load_source("sine", 0)
    bad = ""
except ValueError as exc:
    bad = str(exc)
dist = md.distribution("streamcli-sine")
print(json.dumps({
    "listed": "sine" in info, "dist": info["sine"].distribution, "version": info["sine"].version,
    "module": type(src).__module__, "file": __import__("streamcli_sine").__file__,
    "dist_at": str(dist.locate_file("")), "lengths": [len(s) for s in steps],
    "shape": list(np.asarray(steps[2][4]["wave"]).shape),
    "resume_ok": bool(np.array_equal(next(src.open(1, start=3))["wave"], steps[1][3]["wave"])), "bad": bad,
}))
"""


@pytest.mark.slow
def test_pip_installed_example_is_discovered_and_streams(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, timeout=120)
    assert (target / "streamcli_sine.py").is_file()
    assert any(target.glob("streamcli_sine-*.dist-info/entry_points.txt"))

    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("STREAMCLI_LOAD_PLUGINS", None)
    out = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # What was discovered and run is the copy just installed, not a checkout elsewhere on the path.
    assert Path(got["file"]).parent == target and Path(got["dist_at"]) == target
    assert got["listed"] and got["dist"] == "streamcli-sine" and got["version"] == "0.1.0"
    assert got["module"] == "streamcli_sine"
    assert got["lengths"] == [5, 5, 5] and got["shape"] == [4] and got["resume_ok"]
    assert got["bad"] == "count=0 must be at least 1, e.g. count=8"


def test_builtin_sources_are_listed_through_the_same_entry_point_group() -> None:
    listed = {p.name: p for p in list_plugins()}
    for name, value in {
        "video": "streamcli_sources.video:VideoSource",
        "camera": "streamcli_sources.camera:CameraSource",
        "audio": "streamcli_sources.audio:AudioSource",
        "text": "streamcli_sources.text:TextSource",
    }.items():
        assert listed[name].value == value and listed[name].distribution == "streamcli"
    # Installed under its own name: no distribution ships a top-level package called just `plugins`.
    top_level = importlib.metadata.packages_distributions()
    assert "streamcli" in top_level["streamcli_sources"] and "plugins" not in top_level
