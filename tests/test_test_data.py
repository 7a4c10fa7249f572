"""tests/data travels with the repository: every file is in its table, with its checksum; the shared set is optional."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from conftest import DATA, require_shared, shared_data


def test_every_shipped_file_has_a_row_and_its_checksum_in_the_table() -> None:
    readme = (DATA / "README.md").read_text()
    sums = {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)}
    made_here = {"README.md", "engine_golden.json"}  # the second: recorded hashes (tests/make_engine_golden.py)
    files = {p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file() and p.name not in made_here}
    assert set(sums) == files
    for name, digest in sums.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
        assert f"| {Path(name).name} |" in readme, f"{name} has no row in tests/data/README.md"
    assert sum((DATA / n).stat().st_size for n in files) < 5_500_000


def test_the_shared_set_can_be_hidden_and_its_tests_then_say_why_they_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCLI_DATA", "/nonexistent")
    assert shared_data("video") is None
    with pytest.raises(pytest.skip.Exception, match=r"needs the larger shared test data at /nonexistent/video"):
        require_shared("video")
