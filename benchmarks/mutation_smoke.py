"""Mutation smoke: break a central invariant of the engine, one at a time, and check the fast tests catch it.

    python benchmarks/mutation_smoke.py            # every mutation, on the engine's fast tests (a few minutes)
    python benchmarks/mutation_smoke.py --only is_first

Each mutation is a one-line edit of the library's source in a copy of the working tree (this tree is never
touched): the tie-break of the claims' order, the ``is_first`` flag, the cursor position a saved state records
for resuming, and the padding of rows that ran dry at an epoch's end. The copy's tests run against the copy's
library (``PYTHONPATH``, checked before anything runs). Unmutated, the selection must pass; then every mutation
must fail at least one test. The exit status is 1 if the selection fails unmutated or a mutation survives.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The engine's fast tests (no worker process, no real file): what runs after each mutation.
SELECTION = [
    "tests/test_claims.py",
    "tests/test_engine.py",
    "tests/test_resume.py",
    "tests/test_loader_epochs.py",
    "tests/test_loader_props.py",
    "tests/test_lazy_epoch.py",
]


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    path: str
    old: str
    new: str


MUTATIONS = [
    Mutation(
        "claim_order",
        "claims that fall on the same step go to the rows in reverse order (the key's tie-break)",
        "streamcli/scheduled/claims.py",
        "heapq.heappush(self._heap, (nxt * self.B + b, b))",
        "heapq.heappush(self._heap, (nxt * self.B + self.B - 1 - b, b))",
    ),
    Mutation(
        "is_first",
        "a run that starts a stream does not set is_first",
        "streamcli/fills/flags.py",
        "v.first[t0, b] = fresh",
        "v.first[t0, b] = False",
    ),
    Mutation(
        "resume_position",
        "the saved state records each row's cursor one step past where its stream stands",
        "streamcli/scheduled/cursor.py",
        "return [[int(v) for v in row] for row in cursors]",
        "return [[int(v) + (i == POS) for i, v in enumerate(row)] for row in cursors]",
    ),
    Mutation(
        "epoch_end_padding",
        "rows that ran dry before the epoch's last batches are not padded (they keep the slot's stale data)",
        "streamcli/scheduled/schedule.py",
        "for b in np.flatnonzero((wait_all | dry_all) & ~crossing).tolist():",
        "for b in np.flatnonzero(wait_all & ~crossing).tolist():",
    ),
]


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".venv", ".git", "*.egg-info", "__pycache__", ".*_cache", "build", "samples")
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "plugins")])
    if "STREAMCLI_DATA" not in env:  # the copy has no shared set beside it; the fast tests read none anyway
        env["STREAMCLI_DATA"] = str(ROOT.parent / "shared" / "data")
    return env


def _check_imports(tree: Path) -> None:
    code = "import streamcli, streamcli_sources; print(streamcli.__file__); print(streamcli_sources.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=_env(tree), capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    if not all(Path(p).resolve().is_relative_to(tree.resolve()) for p in out):
        raise SystemExit(f"the copy's tests would import the library from elsewhere: {out}")


def _run_tests(tree: Path, selection: list[str], workers: int) -> tuple[int, list[str], float]:
    """(pytest's exit status, the failed tests' ids, seconds)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-m", "not slow", "-p", "no:cacheprovider", "--maxfail=5"]
    if workers:
        cmd += ["-n", str(workers)]
    t0 = time.perf_counter()
    r = subprocess.run([*cmd, *selection], cwd=tree, env=_env(tree), capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)", r.stdout, re.MULTILINE)
    return r.returncode, failed, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=[m.name for m in MUTATIONS], action="append", help="run only these mutations")
    ap.add_argument("-n", "--workers", type=int, default=0, help="pytest-xdist workers per run (default 0: none)")
    args = ap.parse_args()
    mutations = [m for m in MUTATIONS if not args.only or m.name in args.only]
    survived = 0
    with tempfile.TemporaryDirectory(prefix="streamcli-mutation-") as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        _check_imports(tree)
        rc, failed, secs = _run_tests(tree, SELECTION, args.workers)
        print(f"unmutated: exit {rc}, {len(failed)} failed ({secs:.0f} s) on {' '.join(SELECTION)}")
        if rc != 0:
            raise SystemExit("the selection fails without a mutation: fix that first\n" + "\n".join(failed))
        for m in mutations:
            path = tree / m.path
            original = path.read_text()
            if original.count(m.old) != 1:
                raise SystemExit(f"{m.name}: {m.path} holds {original.count(m.old)} copies of {m.old!r}, not 1")
            line = original[: original.index(m.old)].count("\n") + 1
            path.write_text(original.replace(m.old, m.new))
            try:
                rc, failed, secs = _run_tests(tree, SELECTION, args.workers)
            finally:
                path.write_text(original)
            caught = rc == 1 and bool(failed)
            survived += not caught
            verdict = "caught" if caught else f"SURVIVED (pytest exit {rc})"
            print(f"\n{m.name} ({m.path}:{line}): {m.what}\n  {verdict} by {len(failed)}+ failing tests ({secs:.0f} s)")
            for test in failed[:5]:
                print(f"    {test}")
    print(f"\n{len(mutations) - survived} of {len(mutations)} mutations caught")
    sys.exit(1 if survived else 0)


if __name__ == "__main__":
    main()
