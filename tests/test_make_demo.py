"""Issue 46 (4): ``make demo`` installs what the demo runs (the runtime and its video backends), not the test and
lint tools, and the README says how to reach the ``streamcli`` it installed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe(makefile: str, target: str) -> tuple[str, str]:
    """A Makefile rule's prerequisites and recipe."""
    m = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.M)
    assert m is not None, f"no rule for {target}"
    return m.group(1), m.group(2)


def test_make_demo_installs_the_runtime_only_and_make_test_the_rest() -> None:
    makefile = (ROOT / "Makefile").read_text()
    demo_needs, _ = _recipe(makefile, "demo")
    assert "$(RUNTIME)" in demo_needs and "$(STAMP)" not in demo_needs
    _, runtime = _recipe(makefile, "$(RUNTIME)")
    installed = " ".join(re.findall(r'-e "?\.\[([^\]]*)\]', runtime)).split(",")
    assert "pyav" in installed  # the video backends the demo decodes with
    assert not {"test", "lint", "ray"} & set(installed), installed  # ~100 packages the demo does not run
    test_needs, _ = _recipe(makefile, "test")
    assert "$(STAMP)" in test_needs
    _, full = _recipe(makefile, "$(STAMP)")
    assert "test" in full and "lint" in full


def test_the_readme_says_how_to_put_streamcli_on_path_after_make_demo() -> None:
    readme = (ROOT / "README.md").read_text()
    after = readme[readme.index("make demo") :]
    assert "source .venv/bin/activate" in after.split("make test")[0]
