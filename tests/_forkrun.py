"""Run Python scripts as forks of one interpreter that has imported the heavy modules already (a fork server).

A fresh ``python script.py`` spends about two CPU-seconds importing torch, numpy and streamcli before its first
line of its own; the docs' blocks are many and short. Each script still runs in its own process, as a program of
its own: a fork of a server that did nothing but import, with the script as ``__main__`` (its path in
``sys.argv[0]`` and ``__file__``, so multiprocessing's workers import it as they would), its own folder first on
``sys.path``, its own cwd and environment, its stdout and stderr in files, its exit status as the interpreter
would set it, after its non-daemon threads and its atexit handlers (not the modules' teardown). The server is
single-threaded, so forking it is safe.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The server: imports, then forks once per request (a JSON line on stdin), answers "<pid>" when the child runs
# and "<exit status> <its CPU seconds>" when it has ended. The child leaves the loop and runs the script at top level.
_SERVER = r"""
import json, os, runpy, sys
for name in sys.argv[1:]:
    __import__(name)
import streamcli
for name in streamcli.__all__:  # the package is lazy: load what the scripts use
    getattr(streamcli, name)
child = None
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child = req
        break
    print(pid, flush=True)
    _, status, usage = os.wait4(pid, 0)
    print(os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, flush=True)
if child is not None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, child["stdout"]), (2, child["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    os.close(null)
    sys.stdin = open(os.devnull)
    os.setpgid(0, 0)  # a group of its own: a script that overruns its time is killed with what it started
    os.chdir(child["cwd"])
    os.environ.clear()
    os.environ.update(child["env"])
    sys.path[0] = os.path.dirname(os.path.abspath(child["script"]))
    sys.argv = [child["script"], *child["args"]]
    code = 0
    try:
        runpy.run_path(child["script"], run_name="__main__")
    except SystemExit as exc:  # as the interpreter reads it
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # The interpreter's exit but the teardown of its modules (torch's take most of a CPU-second, and a script
    # started afresh pays them only because it exits): its threads, then its atexit handlers, as Python orders them.
    import atexit, threading
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
"""


class ForkRunner:
    """One server process; ``run`` is ``subprocess.run([python, script], cwd=..., env=..., capture_output=True)``."""

    def __init__(self, preload: tuple[str, ...] = ("numpy", "torch"), env: dict[str, str] | None = None) -> None:
        """``preload``: the modules to import once. ``env``: the server's environment, which its imports see (torch
        reads some variables when it loads); each script is then given its own."""
        self._files = Path(tempfile.mkdtemp(prefix="forkrun-"))  # the server's stderr, the scripts' stdout and stderr
        with (self._files / "server.stderr").open("w") as stderr:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, *preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env if env is not None else {**os.environ, "CUDA_VISIBLE_DEVICES": ""},
            )
        self._buf = b""
        self._runs = 0
        self.cpu_s = 0.0
        """The CPU time of the last script (its own, and its waited-for children's)."""

    def run(
        self, script: Path, cwd: Path, env: dict[str, str], timeout: float = 300, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        """``python script *args`` in ``cwd`` with ``env``, its output captured."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._runs += 1
        out, err = self._files / f"{self._runs}.stdout", self._files / f"{self._runs}.stderr"
        req = {"script": str(script), "args": args, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        self._proc.stdin.write(json.dumps(req).encode() + b"\n")
        self._proc.stdin.flush()
        pid = int(self._line(60, "the fork server to start the script"))
        try:
            code, cpu = self._line(timeout, f"{script.name} to end").split()
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)  # the child's own group: the script and what it started
            self._line(30, f"{script.name} to end after SIGKILL")
            raise subprocess.TimeoutExpired([script.name], timeout, out.read_text(), err.read_text()) from None
        stdout, stderr = out.read_text(), err.read_text()
        out.unlink()
        err.unlink()
        self.cpu_s = float(cpu)
        return subprocess.CompletedProcess([sys.executable, script.name, *args], int(code), stdout, stderr)

    def _line(self, timeout: float, what: str) -> str:
        """The server's next line (read from its pipe's descriptor: a buffered reader could hold the next line
        where ``select`` does not see it)."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(what)
            chunk = os.read(fd, 4096)
            if not chunk:
                err = (self._files / "server.stderr").read_text()[-3000:]
                raise RuntimeError(f"the fork server died (exit {self._proc.wait()}) while waiting for {what}:\n{err}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()  # the server's loop ends at EOF
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        shutil.rmtree(self._files, ignore_errors=True)
