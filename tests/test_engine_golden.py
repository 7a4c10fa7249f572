"""Whole-epoch hashes of batches and states, recorded before the fill engines are merged (issue 35).

Each case of ``tests/_golden.py`` runs its epochs and a resume on another worker count and must give the hashes
recorded in ``tests/data/engine_golden.json`` (``python -m tests.make_engine_golden`` records them, with the
commit). A change that alters a batch or a state for any source, worker count, balance setting, segment, boundary,
epoch end or resume fails here, naming the case and which hash moved. Cases that start no process and read no
shared file also run in the fast selection, without their resume.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _golden import CASES, Case, Data, agreement_errors, coverage_gaps, run_case
from conftest import require_shared, shared_root

GOLDEN = Path(__file__).resolve().parent / "data" / "engine_golden.json"
RECORD: dict[str, Any] = json.loads(GOLDEN.read_text())
RECORDED: dict[str, dict[str, Any]] = RECORD["cases"]
REGENERATE = "if the change is meant, rerun `python -m tests.make_engine_golden` and say why in the commit"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generated inputs (event recordings, a shard export) made once for the module's cases."""
    return tmp_path_factory.mktemp("engine_golden")


def _data(case: Case, work: Path) -> Data:
    if case.spec.shared is not None:
        require_shared(case.spec.shared)  # skips, naming the set
    root = shared_root()
    return Data(root if root.is_dir() else None, work)


def _compare(case: Case, got: dict[str, Any]) -> None:
    want = RECORDED[case.id]
    moved = [k for k in got if got[k] != want[k]]
    assert not moved, (
        f"{case.id}: {', '.join(moved)} differ from the recording at {RECORD['commit'][:12]}; {REGENERATE}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_whole_epochs_and_a_resume_match_the_recording(case: Case, work: Path, no_leaks: None) -> None:
    _compare(case, {"config": case.config_key, **run_case(case, _data(case, work))})


IN_PROCESS = [c for c in CASES if c.workers == 0 and c.spec.shared is None]


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_in_process_epochs_match_the_recording(case: Case, work: Path) -> None:
    _compare(case, run_case(case, _data(case, work), resume=False))


def test_the_matrix_covers_every_option_on_every_worker_count() -> None:
    assert coverage_gaps(CASES) == []
    assert 40 <= len(CASES) <= 80
    assert len({c.id for c in CASES}) == len(CASES), "two cases share an id"


def test_the_recording_holds_every_case_and_its_commit() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", RECORD["commit"])
    assert sorted(RECORDED) == sorted(c.id for c in CASES), REGENERATE
    for case in CASES:
        assert RECORDED[case.id]["config"] == case.config_key


def test_one_configuration_gives_the_same_hashes_on_every_worker_count() -> None:
    assert agreement_errors(RECORDED) == []
