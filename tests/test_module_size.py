"""Every module of the library and the built-in plugins reads in one sitting: a budget of 400 lines (issue 49)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST = 400


def test_no_module_of_the_library_or_the_plugins_is_over_400_lines() -> None:
    files = sorted(p for package in ("streamcli", "plugins") for p in (ROOT / package).rglob("*.py"))
    assert len(files) > 100  # the tree was found (a wrong root would pass on nothing)
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MOST}
    assert not long, f"split these by concept: {long}"
