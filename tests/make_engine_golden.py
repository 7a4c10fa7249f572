"""Record the engine's whole-epoch hashes: ``python -m tests.make_engine_golden`` (from the repository root).

Runs every case of ``tests/_golden.py`` and writes ``tests/data/engine_golden.json`` with the commit it was made at.
It refuses to write a partial file: the shared test data must be present, the matrix must cover what it
promises, and each configuration must give the same batches and states on every worker count.
``--check`` compares with the recorded file instead of writing it (exit 1 naming each case that differs);
``--out PATH`` writes elsewhere (e.g. to check that two runs agree). Not collected by pytest (``test_*.py`` only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GOLDEN = TESTS / "data" / "engine_golden.json"
# As pytest does (rootdir-relative imports of tests/): workers unpickle the test sources by these module names.
sys.path.insert(0, str(TESTS))

import _golden  # noqa: E402


def shared_root() -> Path:
    """As ``conftest.shared_root``: ``$STREAMCLI_DATA``, else ``../shared/data`` beside the checkout."""
    env = os.environ.get("STREAMCLI_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def compute(shared: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="engine_golden_") as tmp:
        work = Path(tmp)
        os.environ["STREAMCLI_CACHE_DIR"] = str(work / "cache")  # never the user's cache
        data = _golden.Data(shared, work)
        for case in _golden.CASES:
            t0 = time.perf_counter()
            out[case.id] = {"config": case.config_key, **_golden.run_case(case, data)}
            print(f"{time.perf_counter() - t0:6.2f} s  {case.id}", file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.make_engine_golden", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=GOLDEN, help=f"where to write (default {GOLDEN})")
    parser.add_argument("--check", action="store_true", help="compare with the recorded file instead of writing")
    args = parser.parse_args(argv)
    shared = shared_root()
    missing = sorted({sub for _, sub in _golden.iter_cases(shared) if sub is not None})
    if missing:
        print(f"the shared test data lacks {', '.join(missing)} under {shared}; set STREAMCLI_DATA", file=sys.stderr)
        return 2
    gaps = _golden.coverage_gaps(_golden.CASES)
    if gaps:
        print("the matrix does not cover: " + "; ".join(gaps), file=sys.stderr)
        return 2

    def changed() -> set[str]:
        return {p for p in _git("status", "--porcelain", "--", "streamcli", "plugins").splitlines() if p}

    commit, before = _git("rev-parse", "HEAD"), changed()  # and after: what changes while the cases run counts
    cases = compute(shared)
    if _git("rev-parse", "HEAD") != commit:
        print(f"HEAD moved from {commit[:12]} while the cases ran; run again", file=sys.stderr)
        return 1
    errors = _golden.agreement_errors(cases)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    if args.check:
        recorded = json.loads(args.out.read_text())["cases"]
        diff = sorted(k for k in set(cases) | set(recorded) if cases.get(k) != recorded.get(k))
        for k in diff:
            print(f"differs: {k}\n  recorded {recorded.get(k)}\n  now      {cases.get(k)}", file=sys.stderr)
        return 1 if diff else 0
    record: dict[str, Any] = {
        "commit": commit,
        "uncommitted_library_changes": sorted(before | changed()),
        "made_by": "python -m tests.make_engine_golden",
        "about": (
            "sha256 over whole epochs of batches and states per case of tests/_golden.py (CASES); "
            "tests/test_engine_golden.py compares against it"
        ),
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(cases)} cases to {args.out} at {record['commit'][:12]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
