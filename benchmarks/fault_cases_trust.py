"""The fault sweep's cases for issue 46's classes: tampered states, stale or hostile indexes, the loader's lifecycle and
the export's edges. ``fault_sweep.all_cases`` adds them; each case gets the sweep module itself (``sweep``) for its
``Ctx``, ``Outcome`` and judges, so that this file holds the cases alone.

- state/: every single-integer change of a real state, a tampered re-plan, a state from before the seal;
- index/: a file appended to or a clip replaced after indexing (with workers), an S3 object written again, lengths
  edited by hand, names that climb out of the folder, a FIFO as ``index=``, ``--on-error skip --json``, an index
  from before the fingerprints;
- lifecycle/: the loader SIGKILLed mid-epoch (``$TMPDIR`` and processes), a source stalled with ``timeout=None``,
  ``length()`` answers that are not counts, ``timeout=nan``;
- export/: a loader that handed out batches, a closed loader, a second ``--overwrite`` export beside a running one,
  ``--json`` errors of every command, ``replay`` of a folder without an export.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
PRELUDE = f"import sys, json\nsys.path.insert(0, {str(TESTS)!r})\n"


def _wait(pred: Callable[[], Any], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _last_json(text: str) -> Any:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def cases(quick: bool, sweep: ModuleType) -> dict[str, Callable[[Any, Any], Any]]:
    """Every case of the four classes (``quick``: S3 left out)."""
    Outcome = sweep.Outcome

    def py(ctx: Any, code: str, what: str, timeout: float = 180) -> tuple[Any, Any]:
        """Run ``code`` (after the prelude) in a subprocess; its last JSON line, or an outcome if it failed."""
        res = ctx.py(PRELUDE + code, timeout=timeout)
        bad = sweep.judged_ok(res, what)
        if bad is not None:
            return bad, None
        got = _last_json(res.out)
        if got is None:
            return Outcome("defect", f"{what}: no result: {res.err.strip()[-200:]}"), None
        return None, got

    # ------------------------------------------------------------------------------------------------ states
    def state_integers(ctx: Any, world: Any) -> Any:
        bad, got = py(ctx, _STATE_INTEGERS, "every single-integer change")
        if bad is not None:
            return bad
        if got["accepted"]:
            return Outcome(
                "loss", f"{len(got['accepted'])} of {got['tried']} changed states accepted: {got['accepted'][:4]}"
            )
        if got["tried"] < 40:
            return Outcome("defect", f"only {got['tried']} changes tried")
        return Outcome("clean", f"{got['tried']} single-integer changes, each refused with StateError ({got['named']})")

    def state_replan(ctx: Any, world: Any) -> Any:
        bad, got = py(ctx, _STATE_REPLAN, "a tampered re-plan")
        if bad is not None:
            return bad
        if got["accepted"]:
            return Outcome("loss", f"tampered re-plans accepted: {got['accepted']}")
        if not got["untouched_loads"]:
            return Outcome("defect", "the untouched re-planned state was refused")
        return Outcome("clean", "a stream removed and tickets +2 refused naming the digest; the untouched one loads")

    def state_old(ctx: Any, world: Any) -> Any:
        bad, got = py(ctx, _STATE_OLD, "a state without its digest")
        if bad is not None:
            return bad
        if not got["same"]:
            return Outcome("loss", "the unsealed state did not resume exactly")
        if not got["warned"]:
            return Outcome("rough", "loaded without a word that it is unsealed")
        return Outcome("clean", "an older (unsealed) state loads with a warning and resumes exactly")

    # ------------------------------------------------------------------------------------------------ indexes
    def books(ctx: Any) -> Path:
        folder: Path = ctx.dir / "books"
        folder.mkdir()
        for name in ("tom_sawyer_excerpt.txt", "fortunes_literature.txt"):
            shutil.copy2(sweep.SHARED / "text" / name, folder / name)
        return folder

    def export_text(ctx: Any, folder: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
        return ctx.cli("export", "text", str(folder), str(ctx.dir / "out"), sweep.SET, "width=64", "-b", "2",
                       "-t", "16", "-w", "0", *extra, env=env)  # fmt: skip

    def index_appended(ctx: Any, world: Any) -> Any:
        folder = books(ctx)
        bad = sweep.judged_ok(ctx.cli("index", "text", str(folder), sweep.SET, "width=64"), "index")
        if bad:
            return bad
        with open(folder / "tom_sawyer_excerpt.txt", "ab") as f:
            f.write((folder / "tom_sawyer_excerpt.txt").read_bytes() * 2)
        res = export_text(ctx, folder)
        return sweep.judged_error(res, (1,), ("tom_sawyer_excerpt.txt", "streamcli index text"), made=ctx.dir / "out")

    def index_clip_replaced(ctx: Any, world: Any) -> Any:
        folder = ctx.dir / "clips"
        folder.mkdir()
        shutil.copy2(sweep.TESTDATA / "video" / "dummy_video.avi", folder / "a.avi")
        shutil.copy2(sweep.TESTDATA / "video" / "realshort.mp4", folder / "b.mp4")
        bad = sweep.judged_ok(ctx.cli("index", "video", str(folder), sweep.SET, "scan=true"), "index")
        if bad:
            return bad
        shutil.copyfile(sweep.TESTDATA / "video" / "realshort.mp4", folder / "a.avi")  # a longer clip in its place
        res = ctx.cli("export", "video", str(folder), str(ctx.dir / "out"), sweep.SET, "scan=true", sweep.SET,
                      "size=16x16", "-b", "2", "-t", "8", "-w", "2")  # fmt: skip
        return sweep.judged_error(res, (1,), ("a.avi", "streamcli index video"), made=ctx.dir / "out")

    def index_s3_rewritten(ctx: Any, world: Any) -> Any:
        env = world.s3_env()
        bucket = world.bucket()
        from streamcli.storage.remote import Remote

        remote = Remote(bucket)
        for k in range(3):
            remote.write(f"t{k}.txt", b"abcd" * 40)
        bad = sweep.judged_ok(ctx.cli("index", "text", bucket, sweep.SET, "width=4", env=env), "index on S3")
        if bad:
            return bad
        remote.write("t1.txt", b"abcd" * 120)
        res = ctx.cli("export", "text", bucket, str(ctx.dir / "out"), sweep.SET, "width=4", "-b", "2", "-t", "4",
                      "-w", "0", env=env)  # fmt: skip
        return sweep.judged_error(res, (1,), ("t1.txt", "streamcli index text"), made=ctx.dir / "out")

    def rewrite(where: Path, edit: Callable[[dict[str, np.ndarray], dict[str, Any]], None], seal: bool) -> None:
        from streamcli import index_format

        with np.load(where) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(data["meta"].tobytes())
        edit(data, meta)
        if seal:  # as a tool that knows the format would: the header made to match
            meta["count"] = len(data["lengths"])
            meta["digest"] = index_format.names_digest(data["names"])
            meta["seal"] = index_format.seal_of(meta, data)
        data["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **data)
        where.write_bytes(buf.getvalue())

    def index_edited(ctx: Any, world: Any) -> Any:
        folder = books(ctx)
        bad = sweep.judged_ok(ctx.cli("index", "text", str(folder), sweep.SET, "width=64"), "index")
        if bad:
            return bad

        def shorten(data: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
            data["lengths"] = data["lengths"] // 2

        rewrite(folder / ".streamcli-index.npz", shorten, seal=False)
        res = export_text(ctx, folder)
        return sweep.judged_error(res, (1, 2), ("changed after it was written", "streamcli index text"),
                                  made=ctx.dir / "out")  # fmt: skip

    def index_climbing(name: str) -> Callable[[Any, Any], Any]:
        def case(ctx: Any, world: Any) -> Any:
            folder = books(ctx)
            (ctx.dir / "secret.txt").write_text("secret")
            bad = sweep.judged_ok(ctx.cli("index", "text", str(folder), sweep.SET, "width=64"), "index")
            if bad:
                return bad
            target = name.replace("ABS", str(ctx.dir / "secret.txt"))

            def climb(data: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
                names = data["names"].tobytes().split(b"\0")
                names[-1] = target.encode()
                data["names"] = np.frombuffer(b"\0".join(names), np.uint8)

            rewrite(folder / ".streamcli-index.npz", climb, seal=True)
            res = export_text(ctx, folder)
            return sweep.judged_error(res, (1, 2), ("outside the indexed folder",), made=ctx.dir / "out")

        return case

    def index_fifo(ctx: Any, world: Any) -> Any:
        folder = books(ctx)
        fifo = ctx.dir / "index.npz"
        os.mkfifo(fifo)
        res = export_text(ctx, folder, sweep.SET, f"index={fifo}")
        return sweep.judged_error(res, (1, 2), ("not a regular file",), made=ctx.dir / "out")

    def index_skip_json(ctx: Any, world: Any) -> Any:
        folder = ctx.dir / "clips"
        folder.mkdir()
        shutil.copy2(sweep.TESTDATA / "video" / "dummy_video.avi", folder / "a.avi")
        (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
        res = ctx.cli("index", "video", str(folder), sweep.SET, "scan=true", "--on-error", "skip", "--json")
        bad = sweep.judged_ok(res, "index --on-error skip --json")
        if bad:
            return bad
        got = json.loads(res.out)
        left = [Path(s["item"]).name for s in got["skipped"]]
        if left != ["broken.mp4"] or got["items"] != 1:
            return Outcome("defect", f"skipped={left}, items={got['items']}")
        return Outcome("clean", "the clip left out is named under skipped")

    def index_old(ctx: Any, world: Any) -> Any:
        folder = books(ctx)
        bad = sweep.judged_ok(ctx.cli("index", "text", str(folder), sweep.SET, "width=64"), "index")
        if bad:
            return bad

        def unseal(data: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
            del data["sizes"], data["marks"], meta["seal"]

        rewrite(folder / ".streamcli-index.npz", unseal, seal=False)
        res = export_text(ctx, folder, "--json")
        bad = sweep.judged_ok(res, "export over an index from before the fingerprints")
        if bad:
            return bad
        if "no fingerprint" not in res.err or "streamcli index text" not in res.err:
            return Outcome("rough", f"loaded without naming the rebuild: {res.err.strip()[-200:]}")
        return Outcome("clean", "an index from before the fingerprints loads, with a warning naming the rebuild")

    # ------------------------------------------------------------------------------------------------ lifecycle
    def killed_mid_epoch(ctx: Any, world: Any) -> Any:
        # A $TMPDIR of its own, short enough for the fork server's socket (the case's own is too long a path: the
        # loader would spawn its workers instead, and the fork server's folder would not be tested).
        tmp = Path(tempfile.mkdtemp(prefix="k-", dir="/tmp"))
        try:
            proc = ctx.start(python=PRELUDE + _KILLED, env={"TMPDIR": str(tmp)})
            line = proc.stdout.readline().strip() if proc.stdout is not None else ""
            if line != "mid-epoch":
                return Outcome("defect", f"the loader did not start: {line!r}")
            made = [p.name for p in tmp.iterdir()]
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
            if not made:
                return Outcome("defect", "the fork server made no folder: nothing was tested")
            if not _wait(lambda: not any(tmp.iterdir()), 15):
                return Outcome("leak", f"$TMPDIR holds {sorted(os.listdir(tmp))} after the kill")
            return Outcome("clean", f"$TMPDIR empty again after a kill -9 mid-epoch (it held {made})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def stalled(ctx: Any, world: Any) -> Any:
        res = ctx.py(PRELUDE + _STALLED, timeout=120)
        bad = sweep.judged_ok(res, "a source stalled 4 s with timeout=None")
        if bad:
            return bad
        warned = [ln for ln in res.err.splitlines() if "without progress" in ln]
        got = _last_json(res.out)
        if not got or got["batches"] != 1:
            return Outcome("loss", f"the stalled stream was not delivered: {got}")
        if len(warned) != 1 or not all(w in warned[0] for w in ("worker 0", "open()", "timeout=")):
            return Outcome("defect", f"{len(warned)} warnings: {warned[:2]}")
        return Outcome("clean", "one warning naming the worker, the item and open(); the wait went on")

    def bad_length(value: str) -> Callable[[Any, Any], Any]:
        def case(ctx: Any, world: Any) -> Any:
            bad, got = py(ctx, _BAD_LENGTH.replace("VALUE", value), f"length() returning {value}")
            if bad is not None:
                return bad
            if got["error"] is None:
                return Outcome("loss", f"length() returning {value} was taken as {got['len']}")
            if not all(w in got["error"] for w in ("LengthSource", "item '0'", "int >= 0")):
                return Outcome("rough", got["error"][:200])
            return Outcome("clean", got["error"][:140])

        return case

    def timeout_value(value: str) -> Callable[[Any, Any], Any]:
        def case(ctx: Any, world: Any) -> Any:
            bad, got = py(ctx, _TIMEOUT.replace("VALUE", value), f"timeout={value}")
            if bad is not None:
                return bad
            if got["error"] is None:
                return Outcome("defect", f"timeout={value} accepted")
            return Outcome("clean", got["error"][:140])

        return case

    # ------------------------------------------------------------------------------------------------ export
    def export_py(code: str, what: str) -> Callable[[Any, Any], Any]:
        def case(ctx: Any, world: Any) -> Any:
            bad, got = py(ctx, code.replace("OUT", repr(str(ctx.dir / "run"))), what)
            if bad is not None:
                return bad
            if got["error"] is None:
                return Outcome("loss" if got.get("wrote") else "defect", f"{what}: exported")
            if got["left"]:
                return Outcome("leak", f"{what}: refused but left {got['left']}")
            if not got.get("same", True):
                return Outcome("loss", f"{what}: the loader's iterator was reset")
            return Outcome("clean", got["error"][:140])

        return case

    def overwrite_beside(ctx: Any, world: Any) -> Any:
        out = ctx.dir / "out"
        args = ["export", "camera", str(out), "-b", "2", "-t", "4", "-w", "0", sweep.SET, "size=32x32", "--overwrite"]
        first = ctx.start(*args, "--batches", "100000")
        try:
            if not _wait(lambda: (out / ".partial.json").exists(), 120):
                return Outcome("defect", "the first export did not start")
            res = ctx.cli(*args, "--batches", "4")
            still = first.poll() is None
        finally:  # stopped as a user would (its cleanup runs): a kill -9 would leave its segment for the next loader
            first.send_signal(signal.SIGTERM)
            try:
                first.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                _kill_session(first.pid)
                first.communicate()
        if not still:
            return Outcome("defect", "the first export ended before the second ran: nothing was tested")
        return sweep.judged_error(res, (1,), ("being written by another export", f"pid {first.pid}"))

    def json_error(args: list[str], code: int, names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
        def case(ctx: Any, world: Any) -> Any:
            (ctx.dir / "file").write_text("")
            (ctx.dir / "empty").mkdir()
            res = ctx.cli(*[a.replace("DIR", str(ctx.dir)) for a in args], "--json")
            if res.hung:
                return Outcome("hang", "no exit")
            try:
                got = json.loads(res.out)
            except ValueError:
                return Outcome("defect", f"stdout is not one JSON object: {res.out.strip()[:160]!r}")
            if res.rc != code or got.get("exit") != code or not got.get("kind"):
                return Outcome("defect", f"exit {res.rc} (want {code}), {got}")
            missing = [n for n in names if n not in got.get("error", "")]
            if missing:
                return Outcome("rough", f"the error does not name {missing}: {got}")
            return Outcome("clean", f"exit {code}: {json.dumps(got)[:140]}")

        return case

    out: dict[str, Callable[[Any, Any], Any]] = {
        "state/every-single-integer-change": state_integers,
        "state/tampered-replan": state_replan,
        "state/before-the-seal": state_old,
        "index/file-appended-after-indexing": index_appended,
        "index/clip-replaced-longer-2-workers": index_clip_replaced,
        "index/lengths-edited-by-hand": index_edited,
        "index/name-climbs-out": index_climbing("../../secret.txt"),
        "index/absolute-name": index_climbing("ABS"),
        "index/fifo-as-index": index_fifo,
        "index/on-error-skip-json": index_skip_json,
        "index/before-the-fingerprints": index_old,
        "lifecycle/sigkill-mid-epoch": killed_mid_epoch,
        "lifecycle/stalled-source-timeout-none": stalled,
        "lifecycle/timeout-nan": timeout_value("float('nan')"),
        "lifecycle/timeout-inf": timeout_value("float('inf')"),
        "export/loader-handed-out-batches": export_py(_EXPORT_USED, "export of a loader that handed out 3 batches"),
        "export/closed-loader": export_py(_EXPORT_CLOSED, "export of a closed loader"),
        "export/second-overwrite-beside-a-running-one": overwrite_beside,
        "export/json-error-export": json_error(["export", "camera", "DIR/file"], 2, ("is not a folder",)),
        "export/json-error-index": json_error(["index", "text", "DIR/missing"], 2, ("missing",)),
        "export/json-error-replay": json_error(["replay", "DIR/empty"], 1, ("no index.json",)),
        "export/json-error-verify": json_error(["verify", "DIR/missing"], 2, ("does not exist",)),
        "export/json-error-plugins": json_error(["plugins", "no-such-plugin"], 2, ("no-such-plugin",)),
    }
    for value in ("-3", "2.5", "'12'", "True"):
        out[f"lifecycle/length-returns-{value.strip(chr(39))}"] = bad_length(value)
    if not quick:
        out["index/s3-object-written-again"] = index_s3_rewritten
    return out


_STATE_INTEGERS = """
import copy
from _sources import CountingSource
from streamcli import StreamLoader
from streamcli.errors import StateError
L = [4, 6, 3, 5, 7, 2, 9, 1]
def make():
    return StreamLoader(CountingSource(L), 2, 3, seed=3)
with make() as a:
    it = iter(a)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(a.state_dict()))
def paths(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, (*path, i))
    elif isinstance(node, int) and not isinstance(node, bool):
        yield path
accepted, tried, named = [], 0, set()
for p in list(paths(state)):
    for d in (-1, 1):
        s = copy.deepcopy(state)
        n = s
        for k in p[:-1]:
            n = n[k]
        n[p[-1]] += d
        tried += 1
        with make() as b:
            try:
                b.load_state_dict(s)
            except StateError as e:
                named.add("digest" if "digest" in str(e) else "a field")
                continue
        accepted.append([list(p), d])
print(json.dumps({"accepted": accepted, "tried": tried, "named": " or ".join(sorted(named))}))
"""

_STATE_REPLAN = """
import copy
from _sources import CountingSource
from streamcli import StreamLoader
from streamcli.errors import StateError
L = [4, 6, 3, 5, 7, 2, 9, 1]
with StreamLoader(CountingSource(L), 2, 3, seed=3) as a:
    it = iter(a)
    for _ in range(3):
        next(it)
    first = json.loads(json.dumps(a.state_dict()))
with StreamLoader(CountingSource(L), 3, 3, seed=3) as b:
    b.load_state_dict(first)
    state = json.loads(json.dumps(b.state_dict()))
accepted = []
for what in ("a stream removed", "tickets + 2"):
    s = copy.deepcopy(state)
    if what == "a stream removed":
        s["replan"]["streams"].pop()
    else:
        s["replan"]["tickets"] += 2
    with StreamLoader(CountingSource(L), 3, 3, seed=3) as c:
        try:
            c.load_state_dict(s)
            accepted.append(what)
        except StateError as e:
            if "digest" not in str(e):
                accepted.append(what + " (refused without naming the digest)")
ok = True
with StreamLoader(CountingSource(L), 3, 3, seed=3) as c:
    try:
        c.load_state_dict(state)
    except StateError:
        ok = False
print(json.dumps({"accepted": accepted, "untouched_loads": ok}))
"""

_STATE_OLD = """
import logging
from _sources import CountingSource
from streamcli import StreamLoader
L = [4, 6, 3, 5, 7, 2, 9, 1]
def make():
    return StreamLoader(CountingSource(L), 2, 3, seed=3)
with make() as r:
    want = [b["x"].numpy().tolist() for b in r]
with make() as a:
    it = iter(a)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(a.state_dict()))
del state["digest"]
seen = []
class H(logging.Handler):
    def emit(self, rec):
        seen.append(rec.getMessage())
logging.getLogger("streamcli").addHandler(H())
with make() as b:
    b.load_state_dict(state)
    got = [x["x"].numpy().tolist() for x in b]
print(json.dumps({"same": got == want[3:], "warned": any("no digest" in m for m in seen)}))
"""

_KILLED = """
from _sources import SlowSource
from streamcli import StreamLoader
if __name__ == "__main__":
    with StreamLoader(SlowSource([400] * 6, delay=0.01), 2, 4, num_workers=2) as loader:
        for i, batch in enumerate(loader):
            if i == 2:
                print("mid-epoch", flush=True)
"""

_STALLED = """
import os, warnings
os.environ["STREAMCLI_STALL_WARN_S"] = "1"
from _sources import SleepyOpenSource
from streamcli import StreamLoader
if __name__ == "__main__":
    warnings.simplefilter("always")
    with StreamLoader(SleepyOpenSource([3], delay=4.0), 1, 4, num_workers=1) as loader:
        n = sum(1 for _ in loader)
    print(json.dumps({"batches": n}))
"""

_BAD_LENGTH = """
from _sources import LengthSource
from streamcli import StreamLoader
from streamcli.errors import SourceError
error, n = None, None
try:
    with StreamLoader(LengthSource([4, 5], VALUE), 1, 2) as loader:
        n = len(loader)
except SourceError as e:
    error = str(e)
print(json.dumps({"error": error, "len": n}))
"""

_TIMEOUT = """
from _sources import CountingSource
from streamcli import StreamLoader
from streamcli.errors import ConfigError
error = None
try:
    StreamLoader(CountingSource([4]), 1, 2, num_workers=1, timeout=VALUE).close()
except ConfigError as e:
    error = str(e)
print(json.dumps({"error": error}))
"""

_EXPORT_USED = """
import os
import streamcli
from _sources import CountingSource
from streamcli import StreamLoader
from streamcli.errors import LoaderUsageError
def make():
    return StreamLoader(CountingSource([60, 45, 80, 33]), 3, 4, seed=1)
with make() as r:
    want = [b["x"].numpy().tolist() for b in r]
error = None
with make() as ld:
    it = iter(ld)
    got = [next(it)["x"].numpy().tolist() for _ in range(3)]
    try:
        streamcli.export(ld, OUT)
    except LoaderUsageError as e:
        error = str(e)
    got += [b["x"].numpy().tolist() for b in it]
left = sorted(os.listdir(OUT)) if os.path.exists(OUT) else []
print(json.dumps({"error": error, "left": left, "same": got == want, "wrote": bool(left)}))
"""

_EXPORT_CLOSED = """
import os
import streamcli
from _sources import CountingSource
from streamcli import StreamLoader
from streamcli.errors import LoaderClosedError
ld = StreamLoader(CountingSource([60, 45]), 3, 4, seed=1)
ld.close()
error = None
try:
    streamcli.export(ld, OUT)
except LoaderClosedError as e:
    error = str(e)
left = sorted(os.listdir(OUT)) if os.path.exists(OUT) else []
print(json.dumps({"error": error, "left": left, "wrote": bool(left)}))
"""
