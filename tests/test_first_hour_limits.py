"""The first hour's limits (issue 34): a batch too large for the machine is refused at once, naming the CLI's own
flags; a signal while shared memory is being allocated, or while workers start, ends the run at once, with no
traceback and nothing left behind; the interrupted export says the whole command to continue with."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest
from _sources import CountingSource
from typer.testing import CliRunner

from streamcli import SharedMemoryError, SourceError, StreamLoader, mix
from streamcli.cli import app
from streamcli.shared import ring, sizing

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]


def wait_for(pred: Callable[[], T], timeout: float, what: str) -> T:
    """Poll ``pred`` until it returns something true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout} s for {what}")
        time.sleep(0.01)
    return got


def segments_of(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"streamcli_{pid}_")]


def test_a_ring_beyond_shared_memory_is_refused_before_torch_or_any_segment(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    import streamcli.loader

    def no_torch() -> None:
        raise AssertionError("torch was imported before the ring's size was checked")

    monkeypatch.setattr(sizing, "_shm_free", lambda root="/dev/shm": 64 * 2**20)  # a default Docker container
    # 4 x 4096 steps of 1 KiB and the flags: 16.5 MiB a slot, 6 slots in-process.
    with monkeypatch.context() as m, pytest.raises(SharedMemoryError) as info:
        m.setattr(streamcli.loader, "import_torch", no_torch)
        StreamLoader(CountingSource([3], pad=1024), 4, 4096)
    msg = str(info.value)
    assert "needs 99 MiB of shared memory (6 batch slots of 16.5 MiB: batch_size=4 x time_steps=4096 steps)" in msg
    assert "/dev/shm has 64 MiB free" in msg and "--shm-size" in msg
    fits = int(msg.split("time_steps=")[-1].split(" fits")[0])
    assert 2000 < fits < 4096  # the largest T whose ring fits: a number to try, not a guess
    with StreamLoader(CountingSource([3], pad=1024), 4, fits) as loader:  # ... and it does fit
        assert len(list(loader)) == 1


def test_a_ring_beyond_half_the_memory_available_is_refused(monkeypatch: pytest.MonkeyPatch, no_leaks: None) -> None:
    # /dev/shm is often larger than what memory can hold (a cgroup's limit, or other processes): its pages are memory.
    monkeypatch.setattr(sizing, "memory_available", lambda: 100 * 2**20)
    with pytest.raises(SharedMemoryError, match=r"half of the 100 MiB of memory available is 50 MiB; .* free memory"):
        StreamLoader(CountingSource([3], pad=1024), 4, 4096)


def test_the_cli_refuses_a_huge_t_at_once_naming_its_own_flags(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app, ["export", "text", str(books), str(out), "-t", "1000000000", "-b", "4", "--batches", "1"]
    )
    assert r.exit_code == 2, r.output
    msg = " ".join(r.output.split())
    assert "-b/--batch-size 4 x -t/--time-steps 1000000000 steps" in msg
    assert "lower -b/--batch-size or -t/--time-steps (-t/--time-steps " in msg
    assert "prefetch" not in msg and "time_steps" not in msg and "batch_size" not in msg  # the library's words
    assert not out.exists()


@pytest.mark.slow
def test_the_refusal_comes_before_torch_is_imported(books: Path, tmp_path: Path) -> None:
    # Importing torch takes seconds on a loaded machine: the refusal must not wait for it.
    script = tmp_path / "run.py"
    script.write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules, file=sys.stderr))\n"
        "if __name__ == '__main__':\n"
        "    from streamcli.cli import main\n"
        "    main()\n"
    )
    cmd = [sys.executable, str(script), "export", "text", str(books), str(tmp_path / "out"), "-t", "1000000000"]
    t0 = time.monotonic()
    r = subprocess.run([*cmd, "-b", "4", "-w", "2", "--batches", "1"], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    assert "-t/--time-steps" in r.stderr and "torch imported: False" in r.stderr
    assert took < 30, f"refused only after {took:.1f} s"


SLOW_ALLOCATION = """
import os, signal, sys, time

def slow(real):
    # A kernel call that answers no signal until it returns, and takes 0.1 s a MiB (a large ring, a busy machine).
    def call(fd, offset, length):
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            time.sleep(0.1 * length / 2**20)
            return real(fd, offset, length)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return call

if __name__ == "__main__":
    os.posix_fallocate = slow(os.posix_fallocate)
    from streamcli.shared import segment
    segment.CHUNK = 2**20
    from streamcli.cli import main
    main()
"""


@pytest.mark.slow
def test_sigterm_while_shared_memory_is_allocated_ends_the_run_at_once_leaving_nothing(
    books: Path, tmp_path: Path
) -> None:
    script = tmp_path / "run.py"
    script.write_text(SLOW_ALLOCATION)
    # 4 x 36000 steps of about 40 bytes: 6 slots of 5.5 MiB in-process, 3.3 s to allocate in one call.
    cmd = [sys.executable, str(script), "export", "text", str(books), str(tmp_path / "out"), "-t", "36000", "-b", "4"]
    proc = subprocess.Popen([*cmd, "-w", "0", "--batches", "1"], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: segments_of(proc.pid) or proc.poll() is not None, 120, "the ring's segment")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rc = proc.wait(timeout=30)
        took = time.monotonic() - t0
        assert rc == 130, proc.stderr.read() if proc.stderr else rc
        assert took < 2.0, f"SIGTERM answered after {took:.1f} s"
        assert not segments_of(proc.pid), proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


SLOW_WORKER_START = """
import os, sys, time

if __name__ == "__mp_main__":  # the fork server (or a spawned worker) imports this script again: slow, as if busy
    open(os.path.join(os.environ["STARTING"], str(os.getpid())), "w").close()
    time.sleep(5)

if __name__ == "__main__":
    from streamcli.cli import main
    main()
"""


@pytest.mark.slow
def test_ctrl_c_while_workers_start_prints_no_traceback_and_the_whole_command(books: Path, tmp_path: Path) -> None:
    script, starting, out = tmp_path / "run.py", tmp_path / "starting", tmp_path / "my out"
    script.write_text(SLOW_WORKER_START)
    starting.mkdir()
    args = ["export", "text", str(books), str(out), "-w", "2", "-b", "4", "-t", "8", "--batches", "5", "--overwrite"]
    env = {**os.environ, "STARTING": str(starting)}
    proc = subprocess.Popen([sys.executable, str(script), *args], stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    try:
        # The workers in their start-up, and the parent exporting (it made OUT_DIR): Ctrl-C, to the whole group.
        wait_for(lambda: (os.listdir(starting) and out.exists()) or proc.poll() is not None, 120, "workers")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        workers = psutil.Process(proc.pid).children(recursive=True)  # a fork server's workers are its children
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read() if proc.stderr else ""
        assert rc == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        again = " ".join(err.split()).split("continue with: ")[1]
        assert again.startswith(f"streamcli export text {books} '{out}' -w 2 -b 4 -t 8 --batches 5 --resume"), err
        assert "--overwrite" not in again  # it excludes --resume
        _gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive
        assert not segments_of(proc.pid), proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ------------------------------------------------------------------------------------------------- warnings
def test_a_built_in_sources_warning_points_at_the_users_line(no_leaks: None) -> None:
    from conftest import data_root

    from streamcli.plugins import load_source

    source = load_source("audio", str(data_root("audio")), mismatch="skip")  # files of other formats: skipped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        loader = StreamLoader(source, 2, 4)
    loader.close()
    skipping = [w for w in caught if "audio: skipping" in str(w.message)]
    assert skipping, [str(w.message) for w in caught]
    assert {(w.filename, w.lineno) for w in skipping} == {(__file__, line)}  # not declared.py


class LyingSource(CountingSource):
    """Says every stream is 2 steps longer than it is."""

    def length(self, item: int) -> int | None:
        return self.lengths[item] + 2


class OwnWarningSource(CountingSource):
    def items(self) -> list[int]:
        warnings.warn("a plugin's own word", UserWarning, stacklevel=1)
        return super().items()


def test_the_loaders_own_warnings_point_at_the_users_line(no_leaks: None) -> None:
    with StreamLoader(LyingSource([5, 3]), 2, 4) as loader, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        for _ in loader:
            pass
    mismatch = [w for w in caught if "len(loader) may be wrong" in str(w.message)]
    assert [(w.filename, w.lineno) for w in mismatch] == [(__file__, line)]


def test_a_plugins_warning_that_points_at_its_own_code_stays_there(no_leaks: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StreamLoader(OwnWarningSource([3]), 2, 4).close()
    where = inspect.getsourcelines(OwnWarningSource.items)[1] + 1
    assert [(w.filename, w.lineno) for w in caught if "own word" in str(w.message)] == [(__file__, where)]


def test_the_pin_memory_warning_points_at_the_users_loop(monkeypatch: pytest.MonkeyPatch, no_leaks: None) -> None:
    import torch

    from streamcli.shared import tensors

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: pin_memory=True pins, and warns of nothing")
    monkeypatch.setattr(tensors, "_pin_warned", False)  # once per process: another test may have had it
    with (
        StreamLoader(CountingSource([3]), 2, 4, pin_memory=True) as loader,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        for _ in loader:
            pass
    pinned = [w for w in caught if "pin_memory=True" in str(w.message)]
    assert [(w.filename, w.lineno) for w in pinned] == [(__file__, line)]  # not loader.py


# ------------------------------------------------------------------------------------------- an empty mix
@pytest.mark.parametrize("until", ["first", "restream"])
def test_a_mix_whose_streams_are_all_empty_is_refused_naming_its_sources(until: str, no_leaks: None) -> None:
    m = mix({"a": CountingSource([0, 0]), "b": CountingSource([0, 0, 0])}, until=until)
    with pytest.raises(SourceError, match=r"every stream of every source is empty \(a, b: 0 steps\)"):
        StreamLoader(m, 4, 16)


def test_an_until_first_mix_with_an_empty_source_is_refused_naming_it(no_leaks: None) -> None:
    m = mix({"books": CountingSource([40, 30]), "blank": CountingSource([0, 0])})
    with pytest.raises(ValueError, match=r"source 'blank' has no steps \(its 2 streams are empty\).*until='restream'"):
        m.items()
    restreamed = mix({"books": CountingSource([40, 30]), "blank": CountingSource([0, 0])}, until="restream")
    with StreamLoader(restreamed, 2, 16) as loader:  # covers every source once: the empty one has nothing to give
        assert sum(int(b.valid.sum()) for b in loader) == 70


# --------------------------------------------------------------------------------------------- padding hint
def test_the_padding_hint_blames_uneven_lengths_not_the_batch_size(no_leaks: None) -> None:
    # One long stream and five of 2 steps at B=4: three rows idle while the long one runs; a smaller -b would not
    # help (at -b 2 half the steps would still be padding), cutting the long stream would.
    with StreamLoader(CountingSource([295, 2, 2, 2, 2, 2]), 4, 16) as loader:
        for _ in loader:
            pass
        hint = loader.stats.padding_hint()
    assert hint is not None
    assert "uneven stream lengths: the longest has 295 steps, 6x the mean of 51" in hint
    assert "--segment N (e.g. --segment 39)" in hint and "batch size" not in hint


def test_the_padding_hint_still_blames_too_few_streams_for_the_rows(no_leaks: None) -> None:
    with StreamLoader(CountingSource([40, 40]), 8, 8) as loader:  # even lengths: 6 of the 8 rows never used
        for _ in loader:
            pass
        hint = loader.stats.padding_hint()
    assert hint is not None and "only 2 streams for 8 rows; use a smaller batch size (-b)" in hint


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_segment_is_made_leaves_no_segment(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None, sig: int
) -> None:
    """A signal that lands inside ``SharedMemory``'s constructor (its file made, the tracker not yet told) is held
    until the segment is known, then raised where the ring's cleanup unlinks it."""
    made: list[str] = []

    class Interrupted(ring.Segment):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self.name)
            # Sent to the main thread itself, mid-construction: a process-directed signal (``os.kill``) may be taken
            # by another thread of the test runner, and its handler then runs at an unknown later bytecode.
            signal.pthread_kill(threading.main_thread().ident or 0, sig)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    monkeypatch.setattr(ring, "Segment", Interrupted)
    old = signal.signal(sig, stop)
    try:
        with pytest.raises(KeyboardInterrupt):
            StreamLoader(CountingSource([5, 7]), 2, 4)
    finally:
        signal.signal(sig, old)
    assert made and not os.path.exists(f"/dev/shm/{made[0]}")
