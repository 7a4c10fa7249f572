"""``--dist loadgroup`` keeps each ``xdist_group`` on one worker with the installed pytest and pytest-xdist
(tests/_groups.py): the Ray tests rely on it, and the docs' and Lightning's module fixtures are made once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(8))
def test_grouped(i):
    pass
"""

FREE = """
import pytest


@pytest.mark.parametrize("i", range(8))
def test_free(i):
    pass
"""


@pytest.mark.slow  # two pytest-xdist workers
def test_the_tests_of_a_group_run_on_one_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))  # _groups, for the subprocess
    pytester.makeconftest(
        "import pytest\nfrom _groups import name_xdist_groups\n\n\n@pytest.hookimpl(trylast=True)\n"
        "def pytest_collection_modifyitems(config, items):\n    name_xdist_groups(config, items)\n"
    )
    pytester.makepyfile(test_grouped=GROUPED, test_free=FREE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=16)
    workers = {
        m[1] for m in re.finditer(r"\[(gw\d)\] .* PASSED test_grouped\.py::test_grouped\[\d\]@one", result.stdout.str())
    }
    assert len(workers) == 1, result.stdout.str()
