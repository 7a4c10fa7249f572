"""tests/_forkrun.py runs a script as ``python script.py`` would: the docs' blocks and the Lightning runs rely on it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _forkrun import ForkRunner

pytestmark = pytest.mark.slow  # it starts a server process and forks it

SCRIPT = """
import atexit, multiprocessing, os, sys, threading, time

def square(x):  # pickled by name: a worker must import this script as its main module
    return x * x

if __name__ == "__main__":
    print(__file__, sys.argv[1:], os.getcwd(), sys.path[0], os.environ.get("FORKRUN_TEST"), sep="|")
    with multiprocessing.get_context("forkserver").Pool(1) as pool:
        print("pool", pool.apply(square, (7,)))
    atexit.register(lambda: print("atexit"))
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread"))).start()
    sys.exit(int(sys.argv[1]))
"""


def test_a_script_runs_as_a_program_of_its_own(tmp_path: Path) -> None:
    script, cwd = tmp_path / "code" / "prog.py", tmp_path / "cwd"
    script.parent.mkdir()
    cwd.mkdir()
    script.write_text(SCRIPT)
    runner = ForkRunner(preload=())
    try:
        env = {**os.environ, "FORKRUN_TEST": "seen"}
        for code in (0, 3):
            run = runner.run(script, cwd, env, timeout=120, args=(str(code), "x"))
            assert run.returncode == code, run.stderr
            lines = run.stdout.splitlines()
            assert lines[0] == f"{script}|{[str(code), 'x']}|{cwd}|{script.parent}|seen", run.stdout
            assert lines[1:] == ["pool 49", "thread", "atexit"], run.stdout  # threads end first, then atexit
        (tmp_path / "bad.py").write_text("import sys\nprint('before')\n1 / 0\n")
        run = runner.run(tmp_path / "bad.py", cwd, env, timeout=60)
        assert run.returncode == 1 and run.stdout == "before\n" and "ZeroDivisionError" in run.stderr
        (tmp_path / "slow.py").write_text("import time\ntime.sleep(600)\n")
        with pytest.raises(subprocess.TimeoutExpired):
            runner.run(tmp_path / "slow.py", cwd, env, timeout=1)
        assert runner.run(tmp_path / "bad.py", cwd, env, timeout=60).returncode == 1  # the server carries on
    finally:
        runner.close()
