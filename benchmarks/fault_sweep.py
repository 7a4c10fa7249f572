"""Fault sweep over issue 34's surfaces, through the real CLI: what a hostile input or an interruption does.

    .venv/bin/python benchmarks/fault_sweep.py            # every case (several minutes)
    .venv/bin/python benchmarks/fault_sweep.py --quick    # a sample of each class (a couple of minutes)
    .venv/bin/python benchmarks/fault_sweep.py --json     # the cases as JSON on stdout
    .venv/bin/python benchmarks/fault_sweep.py --only cache   # the cases whose name holds "cache"

Each case runs ``streamcli`` in a subprocess (its own session, a timeout), in a temp folder of its own with
``$TMPDIR`` inside it, and is classified:

- clean: the exit code and the one-line message expected (naming the file or the fix), or the data exact;
- rough: the right outcome, but a traceback, several lines, or a message that names neither file nor fix;
- defect: the wrong exit code or behaviour;
- loss: exit 0 with missing or garbage data (or a user's file gone);
- leak: a ``/dev/shm`` segment of the run's processes, a process of the run, or a temp file left behind;
- hang: the timeout ran out.

The classes: event files truncated at several offsets, cut mid-word, garbage, header-only, empty, with
coordinates off the sensor; a tampered events cache (index cut or bit-flipped, a decoded column changed, a
same-size edit with the mtime put back); every codec x storage kind (folder, file://, memory://, S3 on a local
moto server) exported, verified and replayed; a cache smaller than the data; kill -9 during an S3 upload, then
--resume; Ctrl-C while workers start; a huge -t; events-from-video --overwrite beside a user's file; a URL
whose fsspec backend is missing; and issue 46's classes (``fault_cases_trust``): tampered states, stale or hostile
indexes, the loader's lifecycle, the export's edges. The exit status is 1 if any case is a defect, loss, leak or
hang.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
STREAMCLI = str(Path(sys.executable).parent / "streamcli")
SHARED = Path(os.environ.get("STREAMCLI_DATA") or ROOT.parent / "shared" / "data")
TESTDATA = ROOT / "tests" / "data"
KINDS = ("clean", "rough", "defect", "loss", "leak", "hang")
SET = "-o"  # the flag of a source option: -s where the CLI has --set (``main`` asks its help)
MARK = "STREAMCLI_FAULT_SWEEP_CASE"  # every process of a case inherits it: how its leftovers are found


@dataclass
class Outcome:
    kind: str
    detail: str = ""


@dataclass
class Result:
    rc: int | None
    out: str
    err: str
    secs: float
    pid: int

    @property
    def hung(self) -> bool:
        return self.rc is None

    def error_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.startswith("error:")]


@dataclass
class Ctx:
    """A case's folder, environment and processes."""

    dir: Path
    env: dict[str, str]
    marker: str
    pids: list[int] = field(default_factory=list)

    def start(self, *args: str, env: dict[str, str] | None = None, python: str | None = None) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-c", python] if python is not None else [STREAMCLI, *args]
        proc = subprocess.Popen(cmd, cwd=self.dir, env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        self.pids.append(proc.pid)
        return proc

    def wait(self, proc: subprocess.Popen[str], timeout: float, t0: float | None = None) -> Result:
        t0 = time.monotonic() if t0 is None else t0
        try:
            out, err = proc.communicate(timeout=timeout)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            rc = None
        return Result(rc, out, err, time.monotonic() - t0, proc.pid)

    def cli(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Result:
        t0 = time.monotonic()
        return self.wait(self.start(*args, env=env), timeout, t0)

    def py(self, code: str, timeout: float = 120) -> Result:
        t0 = time.monotonic()
        return self.wait(self.start(python=code), timeout, t0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ------------------------------------------------------------------------------------------------ judging
def judged_error(res: Result, codes: tuple[int, ...], names: tuple[str, ...], *, made: Path | None = None) -> Outcome:
    """An input that must be refused: exit in ``codes``, one ``error:`` line naming every one of ``names``."""
    if res.hung:
        return Outcome("hang", f"no exit after {res.secs:.0f} s")
    if res.rc == 0:
        wrote = made is not None and made.exists() and any(made.rglob("*.npz"))
        return Outcome("loss" if wrote else "defect", "exit 0" + (" and wrote shards" if wrote else ""))
    lines = res.error_lines()
    text = lines[0] if lines else (res.err.strip().splitlines() or ["(nothing on stderr)"])[-1]
    if res.rc not in codes:
        return Outcome("defect", f"exit {res.rc} (want {'/'.join(map(str, codes))}): {text[:160]}")
    if "Traceback" in res.err:
        return Outcome("rough", f"traceback on stderr: {text[:160]}")
    if len(lines) != 1:
        return Outcome("rough", f"{len(lines)} error lines: {res.err.strip()[:200]}")
    missing = [n for n in names if n not in text]
    if missing:
        return Outcome("rough", f"does not name {missing}: {text[:200]}")
    return Outcome("clean", f"exit {res.rc}: {text[:140]}")


def judged_ok(res: Result, what: str) -> Outcome | None:
    """None if ``res`` exited 0; else the outcome (hang, or a defect naming ``what``)."""
    if res.hung:
        return Outcome("hang", f"{what}: no exit after {res.secs:.0f} s")
    if res.rc != 0:
        return Outcome("defect", f"{what}: exit {res.rc}: {(res.error_lines() or [res.err.strip()[-200:]])[0][:200]}")
    return None


def leaks(ctx: Ctx, shm_before: set[str]) -> list[str]:
    """What the case's processes left: segments, processes (waited for a few seconds), temp files."""
    found: list[str] = []
    deadline = time.monotonic() + 8
    while True:
        alive = []
        for p in psutil.process_iter(["pid"]):
            try:
                if p.environ().get(MARK) == ctx.marker:
                    alive.append(p)
            except (psutil.Error, OSError):
                continue
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for p in alive:
        found.append(f"process {p.pid} ({' '.join(p.cmdline()[:3])[:80]})")
        with _quiet():
            p.kill()
    prefixes = tuple(f"streamcli_{pid}_" for pid in ctx.pids)
    for name in sorted(set(os.listdir("/dev/shm")) - shm_before):
        if name.startswith(prefixes):
            found.append(f"/dev/shm/{name}")
            with _quiet():
                os.unlink(f"/dev/shm/{name}")
    tmp = ctx.dir / "tmp"
    found += [f"$TMPDIR/{p.relative_to(tmp)}" for p in sorted(tmp.rglob("*")) if p.is_file()]
    # An interrupted export's .partial.json is its state for --resume, not a temporary file (the cases that resume
    # check that the export completes; a complete one holds an index.json instead).
    for pattern in (".tmp-*", "*.partial", "*.partial.write", "tmp*.npz"):
        found += [str(p.relative_to(ctx.dir)) for p in ctx.dir.rglob(pattern) if not p.is_relative_to(tmp)]
    return found


@contextmanager
def _quiet() -> Iterator[None]:
    try:
        yield
    except (psutil.Error, OSError):
        pass


# ------------------------------------------------------------------------------------------------ fixtures
class World:
    """What many cases share: a moto S3 server, reference exports, the data folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.moto: Any = None
        self.endpoint = ""
        self.refs: dict[str, Path] = {}

    def s3_env(self) -> dict[str, str]:
        if self.moto is None:
            import logging

            from _moto import ENV, MotoS3, free_port  # type: ignore[import-not-found]

            logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
            server = MotoS3(free_port())
            server.start()
            self.moto = server
            self.endpoint = server.endpoint
            os.environ.update(ENV, AWS_ENDPOINT_URL=server.endpoint)
        from _moto import ENV

        return {**ENV, "AWS_ENDPOINT_URL": self.endpoint}

    def bucket(self) -> str:
        self.s3_env()
        return str(self.moto.bucket())

    def close(self) -> None:
        if self.moto is not None:
            self.moto.stop()


Case = Callable[[Ctx, World], Outcome]


def camera_args(out: str, codec: str, *extra: str) -> list[str]:
    return ["export", "camera", out, "--batches", "6", "-b", "2", "-t", "4", "-w", "0", SET, "size=32x32",
            "--shard-size", "40KB", "--compress", codec, *extra]  # fmt: skip


def shard_bytes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.npz*"))}


def reference(ctx: Ctx, world: World, key: str, args: list[str]) -> Path | None:
    """A local export made once per run (``args`` with OUT as ``{out}``), or None if it failed."""
    if key not in world.refs:
        out = world.root / "refs" / key
        out.parent.mkdir(parents=True, exist_ok=True)
        res = ctx.cli(*[a.replace("{out}", str(out)) for a in args], timeout=300)
        if res.rc != 0:
            return None
        world.refs[key] = out
    return world.refs[key]


def digest_batches(url: str) -> str:
    """The data and flags of every batch of an export (local or a URL), as one hash."""
    from streamcli import ShardReader

    h = hashlib.sha256()
    for b in ShardReader(url):
        for k in sorted(b.data):
            h.update(k.encode() + b[k].numpy().tobytes())
        h.update(b.valid.numpy().tobytes())
    return h.hexdigest()


def streams_seen(out: Path) -> int:
    """The streams with at least one real step in an export."""
    from streamcli import ShardReader

    seen: set[int] = set()
    for b in ShardReader(out):
        seen.update(int(s) for s in b.stream.numpy()[b.valid.numpy()])
    return len(seen)


# ------------------------------------------------------------------------------------------------ events files
def events_cases(quick: bool) -> dict[str, Case]:
    import test_events_hostile as hostile  # type: ignore[import-not-found]

    errors = dict(hostile.ERRORS)
    if quick:
        errors = {k: v for i, (k, v) in enumerate(errors.items()) if i % 4 == 0}

    def bad_file(make: Callable[[Path], Path]) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            (ctx.dir / "in").mkdir()
            path = make(ctx.dir / "in")
            out = ctx.dir / "out"
            res = ctx.cli("export", "events", str(path), str(out), SET, "window_us=40000", "--epochs", "1", "-w", "0")
            return judged_error(res, (1, 2), (path.name,), made=out)

        return case

    cases: dict[str, Case] = {f"events/{k}": bad_file(v) for k, v in errors.items()}

    def off_sensor_given(ctx: Ctx, world: World) -> Outcome:
        ev = hostile.recording(3, 2000)
        ev["x"][700] = hostile.W + 5  # inside a uint16, outside the sensor the user names (x=69)
        path = ctx.dir / "rec.npy"
        np.save(path, ev)
        out = ctx.dir / "out"
        res = ctx.cli("export", "events", str(path), str(out), SET, "window_us=40000",
                      SET, f"sensor_size={hostile.H},{hostile.W}", "--epochs", "1", "-w", "0")  # fmt: skip
        return judged_error(res, (1, 2), ("rec.npy", "x=69", f"{SET} sensor_size=48,70"), made=out)

    cases["events/npy-x-beyond-given-sensor"] = off_sensor_given

    def skipped_in_folder(ctx: Ctx, world: World) -> Outcome:
        folder = ctx.dir / "recs"
        folder.mkdir()
        good = hostile.write(folder / "a-good.raw", hostile.recording(5, hostile.N), "evt3")
        hostile.cut(good, folder / "b-half.raw", good.stat().st_size - 1)
        out = ctx.dir / "out"
        opts = [SET, "window_us=40000", SET, "representation=raw", SET, f"capacity={hostile.N}"]
        res = ctx.cli("export", "events", str(folder), str(out), *opts, "-b", "1", "--epochs", "1", "-w", "0",
                      "--on-error", "skip")  # fmt: skip
        bad = judged_ok(res, "export --on-error skip")
        if bad:
            return bad
        got = _events_of(out)
        want = np.stack([hostile.recording(5, hostile.N)[f].astype(np.int64) for f in "xytp"], axis=1)
        if got.shape != want.shape or not np.array_equal(got, want):
            return Outcome("loss", f"the whole file's events differ: {got.shape} vs {want.shape}")
        if "b-half.raw" not in res.err:
            return Outcome("rough", f"the skipped file is not named: {res.err.strip()[:200]}")
        return Outcome("clean", "the whole file exact; the cut one skipped, named")

    cases["events/folder-skip-cut-file"] = skipped_in_folder
    return cases


def _events_of(out: Path) -> np.ndarray:
    """Every event of an export of the raw representation, B=1, in order (N, 4)."""
    from streamcli import ShardReader

    rows = []
    for b in ShardReader(out):
        ev, count, valid = b["events"].numpy(), b["count"].numpy(), b.valid.numpy()
        for t in range(ev.shape[0]):
            if valid[t, 0]:
                rows.append(ev[t, 0, : int(count[t, 0])])
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 4), np.int64)


def cache_cases(quick: bool) -> dict[str, Case]:
    import test_events_hostile as hostile

    whole = dict(hostile.WHOLE)
    if quick:
        whole = {k: whole[k] for k in ("index-bitflip", "bin-bitflip", "same-size-edit-restored-mtime")}

    def tampered(name: str, make: Callable[[Path], Path]) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            saved = os.environ.get("STREAMCLI_CACHE_DIR")
            os.environ["STREAMCLI_CACHE_DIR"] = ctx.env["STREAMCLI_CACHE_DIR"]
            try:
                path = make(ctx.dir)  # reads the file once in this process (the cache fills), then damages
            finally:
                if saved is None:
                    os.environ.pop("STREAMCLI_CACHE_DIR", None)
                else:
                    os.environ["STREAMCLI_CACHE_DIR"] = saved
            out = ctx.dir / "out"
            res = ctx.cli("export", "events", str(path), str(out), SET, "window_us=40000", SET, "representation=raw",
                          SET, f"capacity={hostile.N}", "-b", "1", "--epochs", "1", "-w", "0")  # fmt: skip
            bad = judged_ok(res, "export")
            if bad:
                return bad
            got, want = _events_of(out), hostile._want(name)
            if got.shape != want.shape or not np.array_equal(got, want):
                return Outcome("loss", f"exit 0, events differ from the file's ({got.shape} vs {want.shape})")
            return Outcome("clean", "the file's events exact")

        return case

    return {f"events-cache/{k}": tampered(k, v) for k, v in whole.items()}


# ------------------------------------------------------------------------------------------------ codecs x storage
def storage_cases(quick: bool) -> dict[str, Case]:
    codecs = ("none", "zstd") if quick else ("none", "zstd", "deflate")
    kinds = ("folder", "file", "memory", "s3")
    cases: dict[str, Case] = {}
    for codec in codecs:
        for kind in kinds:
            cases[f"storage/{codec}-{kind}"] = _roundtrip(codec, kind)
    return cases


_MEMORY_RUN = """
import hashlib, json, sys
import fsspec
from streamcli.cli import app
out = "memory://sweep/run"
codes = [app(args=a, standalone_mode=False) for a in json.loads(sys.argv[1] if len(sys.argv) > 1 else {args!r})]
fs = fsspec.filesystem("memory")
objs = {{p.rsplit("/", 1)[-1]: hashlib.sha256(fs.cat_file(p)).hexdigest() for p in fs.ls("/sweep/run", detail=False)
        if ".npz" in p}}
print(json.dumps({{"codes": codes, "objects": objs}}))
"""


def _roundtrip(codec: str, kind: str) -> Case:
    def case(ctx: Ctx, world: World) -> Outcome:
        ref = reference(ctx, world, f"camera-{codec}", camera_args("{out}", codec))
        if ref is None:
            return Outcome("defect", "the local reference export failed")
        want = shard_bytes(ref)
        if kind == "memory":
            url = "memory://sweep/run"
            runs = [camera_args(url, codec), ["verify", url], ["replay", url]]
            res = ctx.py(_MEMORY_RUN.format(args=json.dumps(runs)), timeout=300)
            bad = judged_ok(res, "export/verify/replay in one process")
            if bad:
                return bad
            got = json.loads(res.out.strip().splitlines()[-1])
            if got["codes"] != [0, 0, 0]:
                return Outcome("defect", f"exit codes export/verify/replay {got['codes']}: {res.err.strip()[-200:]}")
            if got["objects"] != want:
                return Outcome("loss", "objects differ from the local export's")
            return Outcome("clean", f"{len(want)} shards, bytes as the local export's; verify and replay 0")
        env: dict[str, str] = {}
        if kind == "folder":
            url = str(ctx.dir / "run")
        elif kind == "file":
            url = f"file://{ctx.dir / 'run'}"
        else:
            env = world.s3_env()
            url = f"{world.bucket()}/run"
        steps = ((camera_args(url, codec), "export"), (["verify", url], "verify"), (["replay", url], "replay"))
        for args, what in steps:
            bad = judged_ok(ctx.cli(*args, env=env, timeout=300), what)
            if bad:
                return bad
        if kind == "s3":
            import fsspec

            fs = fsspec.filesystem("s3", skip_instance_cache=True)
            got = {p.rsplit("/", 1)[-1]: hashlib.sha256(fs.cat_file(p)).hexdigest()
                   for p in fs.ls(url[len("s3://") :], detail=False) if ".npz" in p}  # fmt: skip
        else:
            got = shard_bytes(ctx.dir / "run")
        if got != want:
            return Outcome("loss", f"shards differ from the local export's ({sorted(got)[:3]} vs {sorted(want)[:3]})")
        return Outcome("clean", f"{len(want)} shards, bytes as the local export's; verify and replay 0")

    return case


# ---------------------------------------------------------------------------------------- cache smaller than the data
CLIPS = ("dummy_video.avi", "Effet_force_magnetique.ogv", "realshort.mp4")


def _clips_dir() -> Path | None:
    found = [SHARED / "video" / c for c in CLIPS]
    return SHARED / "video" if all(p.exists() for p in found) else None


def small_cache_cases(quick: bool) -> dict[str, Case]:
    def upload(world: World, folder: Path) -> str:
        from streamcli.storage.remote import Remote

        url = f"{world.bucket()}/clips"
        for c in CLIPS:
            Remote(url).write(c, (folder / c).read_bytes())
        return url

    def smaller(scan: bool) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            videos = _clips_dir()
            if videos is None:
                return Outcome("clean", "skipped: the shared clips are missing")
            local = ctx.dir / "clips"
            local.mkdir()
            for c in CLIPS:
                shutil.copy(videos / c, local / c)
            opts = [SET, "size=32x32", *([SET, "scan=true"] if scan else [])]
            args = ["--epochs", "1", "-w", "0", "-b", "2", "-t", "8", "--no-shuffle"]
            bad = judged_ok(ctx.cli("export", "video", str(local), str(ctx.dir / "ref"), *opts, *args), "local export")
            if bad:
                return bad
            url = upload(world, local)
            sizes = sorted(p.stat().st_size for p in local.iterdir())
            limit = sizes[-1] + (sizes[0] + sizes[1]) // 2  # the largest fits, not all three
            env = {**world.s3_env(), "STREAMCLI_CACHE_BYTES": str(limit)}
            out = ctx.dir / "out"
            res = ctx.cli("export", "video", url, str(out), *opts, *args, env=env, timeout=300)
            bad = judged_ok(res, f"export at STREAMCLI_CACHE_BYTES={limit}")
            if bad:
                return bad
            n_ref, n_got = streams_seen(ctx.dir / "ref"), streams_seen(out)
            if n_got != n_ref or digest_batches(str(out)) != digest_batches(str(ctx.dir / "ref")):
                return Outcome("loss", f"{n_got} of {n_ref} clips, or their frames differ from the local export")
            return Outcome("clean", f"{n_got} clips exact through a cache of {limit} bytes (data {sum(sizes)})")

        return case

    def too_small(ctx: Ctx, world: World) -> Outcome:
        videos = _clips_dir()
        if videos is None:
            return Outcome("clean", "skipped: the shared clips are missing")
        url = upload(world, videos)
        env = {**world.s3_env(), "STREAMCLI_CACHE_BYTES": "20000"}
        out = ctx.dir / "out"
        res = ctx.cli("export", "video", url, str(out), SET, "size=32x32", "--epochs", "1", "-w", "0", env=env)
        return judged_error(res, (2,), ("STREAMCLI_CACHE_BYTES",), made=out)

    cases = {"small-cache/video-s3": smaller(False), "small-cache/object-over-limit": too_small}
    if not quick:
        cases["small-cache/video-s3-scan"] = smaller(True)
    return cases


# ------------------------------------------------------------------------------------------------ interruptions
def _wait_for(pred: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    return None


def interruption_cases(quick: bool) -> dict[str, Case]:
    def kill_upload(workers: int) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            args = ["--batches", "60", "-b", "2", "-t", "4", "-w", str(workers), SET, "size=32x32",
                    "--shard-size", "20KB", "--no-shuffle"]  # fmt: skip
            ref = reference(ctx, world, f"camera-long-w{workers}", ["export", "camera", "{out}", *args])
            if ref is None:
                return Outcome("defect", "the local reference export failed")
            env = world.s3_env()
            url = f"{world.bucket()}/run"
            import fsspec

            fs = fsspec.filesystem("s3", skip_instance_cache=True)

            def shards_up() -> int:
                fs.invalidate_cache()
                try:
                    return sum(".npz" in p for p in fs.ls(url[5:], detail=False))
                except FileNotFoundError:
                    return 0

            proc = ctx.start("export", "camera", url, *args, env=env)
            if not _wait_for(lambda: shards_up() >= 2 or proc.poll() is not None, 120):
                _kill_group(proc.pid)
                ctx.wait(proc, 10)
                return Outcome("hang", "no shard uploaded in 120 s")
            if proc.poll() is not None:
                return Outcome("clean", "skipped: the export ended before the kill (too fast to interrupt)")
            os.kill(proc.pid, signal.SIGKILL)  # the main process only: its workers must notice
            ctx.wait(proc, 30)
            res = ctx.cli("export", "camera", url, *args, "--resume", env=env, timeout=300)
            bad = judged_ok(res, "export --resume")
            if bad:
                return bad
            bad = judged_ok(ctx.cli("verify", url, env=env), "verify")
            if bad:
                return bad
            fs.invalidate_cache()  # the listing from before the kill
            got = {p.rsplit("/", 1)[-1]: hashlib.sha256(fs.cat_file(p)).hexdigest()
                   for p in fs.ls(url[5:], detail=False) if ".npz" in p}  # fmt: skip
            want = shard_bytes(ref)
            if got != want:
                (ctx.dir / "got").mkdir()
                for p in fs.ls(url[5:], detail=False):
                    with _quiet():
                        (ctx.dir / "got" / p.rsplit("/", 1)[-1]).write_bytes(fs.cat_file(p))
                differ = sorted(n for n in {*got, *want} if got.get(n) != want.get(n))
                return Outcome(
                    "loss",
                    f"after --resume, {len(differ)} of {len(want)} shards differ from the "
                    f"uninterrupted export's: {differ[:4]} (objects in {ctx.dir / 'got'})",
                )
            return Outcome("clean", f"killed after a few shards; --resume gave {len(got)} shards, byte-identical")

        return case

    def ctrl_c(workers: int, after: str) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            text = SHARED / "text" if (SHARED / "text").is_dir() else TESTDATA / "text"
            out = ctx.dir / "out"
            args = ("export", "text", str(text), str(out), "-b", "2", "-t", "64", "-w", str(workers), "--epochs", "3")
            proc = ctx.start(*args)
            t0 = time.monotonic()

            def kids() -> bool:
                try:
                    return len(psutil.Process(proc.pid).children()) >= workers
                except psutil.Error:
                    return False

            if after == "workers":
                _wait_for(lambda: kids() or proc.poll() is not None, 60)
            else:
                time.sleep(0.5)  # inside the start-up (imports): no positive signal to wait for there
            if proc.poll() is not None:
                return Outcome("clean", "skipped: the export ended before the signal")
            os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
            res = ctx.wait(proc, 30, t0)
            if res.hung:
                return Outcome("hang", "no exit 30 s after Ctrl-C")
            if res.rc not in (130, -signal.SIGINT):  # -2: died of the signal, which a shell shows as 130 too
                return Outcome("defect", f"exit {res.rc}, not 130: {res.err.strip()[-200:]}")
            if "Traceback" in res.err:
                return Outcome("rough", f"a traceback after Ctrl-C: {res.err.strip()[:200]}")
            if any(out.rglob("*.npz")) and "streamcli export text" not in res.err.replace("\n", " "):
                return Outcome("rough", f"the command to continue is not whole: {res.err.strip()[-300:]}")
            return Outcome("clean", f"exit 130, no traceback: {res.err.strip().splitlines()[-1:]}")

        return case

    def huge_t(t: str) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            text = SHARED / "text" if (SHARED / "text").is_dir() else TESTDATA / "text"
            out = ctx.dir / "out"
            res = ctx.cli("export", "text", str(text), str(out), "-t", t, "-b", "4", "--batches", "1", timeout=60)
            got = judged_error(res, (2,), ("-t", "-b"), made=out)
            if got.kind == "clean" and res.secs > 15:
                return Outcome("rough", f"refused only after {res.secs:.0f} s: {got.detail}")
            return got

        return case

    cases = {
        "interrupt/kill-9-s3-upload-resume-w0": kill_upload(0),
        "interrupt/ctrl-c-as-workers-start": ctrl_c(2, "workers"),
        "interrupt/huge-t-1e7": huge_t("10000000"),
    }
    if not quick:
        cases["interrupt/kill-9-s3-upload-resume-w2"] = kill_upload(2)
        cases["interrupt/ctrl-c-during-start-up"] = ctrl_c(2, "start")
        cases["interrupt/huge-t-1e8"] = huge_t("100000000")
    return cases


# -------------------------------------------------------------------------------------------- events-from-video, URLs
def misc_cases(quick: bool) -> dict[str, Case]:
    clip = TESTDATA / "video" / "dummy_video.avi"

    def efv_overwrite(to: str, users_first: bool) -> Case:
        """The user's files put in OUT_DIR before the first run, or between a run and its --overwrite."""

        def case(ctx: Ctx, world: World) -> Outcome:
            out = ctx.dir / "events"
            out.mkdir()
            mine = {n: os.urandom(300 + i) for i, n in enumerate(("00001-holiday.raw", "00000-x.npy", "notes.md"))}

            def put() -> None:
                for n, data in mine.items():
                    (out / n).write_bytes(data)

            if users_first:
                put()
            first = ctx.cli("events-from-video", "video", str(clip), str(out), "--to", to)
            if not users_first:
                put()
            second = ctx.cli("events-from-video", "video", str(clip), str(out), "--to", to, "--overwrite")
            gone = [n for n, data in mine.items() if not (out / n).exists() or (out / n).read_bytes() != data]
            if gone:
                return Outcome("loss", f"the user's files {gone} were deleted or changed")
            for res, what in ((first, "first run"), (second, "--overwrite")):
                if res.hung:
                    return Outcome("hang", what)
                if res.rc not in (0, 2):
                    return Outcome("defect", f"{what}: exit {res.rc}: {res.err.strip()[-200:]}")
                named = any(n in "".join(res.error_lines()) for n in mine)
                if res.rc == 2 and not (named and len(res.error_lines()) == 1 and "Traceback" not in res.err):
                    return Outcome("rough", f"{what}: refused without naming the user's file: {res.err.strip()[:200]}")
            if not users_first and first.rc != 0:
                return Outcome("defect", f"the first run into an empty folder failed: {first.err.strip()[:200]}")
            return Outcome("clean", f"the user's files kept, byte for byte (exit {first.rc}, then {second.rc})")

        return case

    def efv_bad(flag: str, value: str) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            res = ctx.cli("events-from-video", "video", str(clip), str(ctx.dir / "ev"), flag, value)
            return judged_error(res, (2,), (flag,), made=ctx.dir / "ev")

        return case

    def efv_under_file(ctx: Ctx, world: World) -> Outcome:
        (ctx.dir / "afile").write_text("x")
        res = ctx.cli("events-from-video", "video", str(clip), str(ctx.dir / "afile" / "ev"))
        return judged_error(res, (2,), ("afile",))

    def missing_backend(url: str, package: str) -> Case:
        def case(ctx: Ctx, world: World) -> Outcome:
            res = ctx.cli(*camera_args(url, "none"))
            return judged_error(res, (2,), ("pip install", package))

        return case

    def events_url(ctx: Ctx, world: World) -> Outcome:
        res = ctx.cli("export", "events", "s3://bucket/recs", str(ctx.dir / "out"), SET, "window_us=1000")
        return judged_error(res, (2,), ("s3://bucket/recs", "download"))

    cases = {
        "efv/overwrite-after-users-files-added-evt3": efv_overwrite("evt3", False),
        "efv/users-files-before-the-first-run-evt3": efv_overwrite("evt3", True),
        "efv/noise-nan": efv_bad("--noise", "nan"),
        "efv/threshold-inf": efv_bad("--threshold", "inf"),
        "efv/out-under-a-file": efv_under_file,
        "url/hdfs-without-pyarrow": missing_backend("hdfs://h/run", "pyarrow"),
        "url/events-source-given-s3": events_url,
    }
    if not quick:
        cases["efv/overwrite-after-users-files-added-npy"] = efv_overwrite("npy", False)
        cases["efv/overwrite-after-users-files-added-aedat4"] = efv_overwrite("aedat4", False)
        cases["url/sftp-without-paramiko"] = missing_backend("sftp://h/run", "paramiko")
    return cases


# ------------------------------------------------------------------------------------------------ running
def _backend_missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


def all_cases(quick: bool) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for make in (events_cases, cache_cases, storage_cases, small_cache_cases, interruption_cases, misc_cases):
        cases.update(make(quick))
    import fault_cases_trust  # type: ignore[import-not-found]

    cases.update(fault_cases_trust.cases(quick, sys.modules[__name__]))
    if not _backend_missing("pyarrow"):
        cases.pop("url/hdfs-without-pyarrow", None)
    if not _backend_missing("paramiko"):
        cases.pop("url/sftp-without-paramiko", None)
    return cases


def run_case(name: str, fn: Case, world: World, root: Path) -> Outcome:
    case_dir = Path(tempfile.mkdtemp(prefix=name.replace("/", "-")[:60] + "-", dir=root))
    (case_dir / "tmp").mkdir()
    marker = uuid.uuid4().hex
    env = {**os.environ, MARK: marker, "TMPDIR": str(case_dir / "tmp"), "STREAMCLI_CACHE_DIR": str(case_dir / "cache"),
           "COLUMNS": "200", "PYTHONWARNINGS": "ignore::DeprecationWarning"}  # fmt: skip
    ctx = Ctx(case_dir, env, marker)
    shm_before = set(os.listdir("/dev/shm"))
    try:
        got = fn(ctx, world)
    except Exception as exc:  # the sweep's own failure: reported, never counted clean
        got = Outcome("defect", f"the case itself raised {type(exc).__name__}: {exc}")
    left = leaks(ctx, shm_before)
    if left and got.kind in ("clean", "rough"):
        return Outcome("leak", f"{len(left)} left: {', '.join(left[:4])} (and: {got.detail[:80]})")
    if left:
        got.detail += f"; also left {', '.join(left[:3])}"
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a sample of each class")
    ap.add_argument("--json", action="store_true", help="print every case as JSON")
    ap.add_argument("--only", default="", help="run the cases whose name holds this")
    ap.add_argument("--keep", action="store_true", help="keep the temp folders (printed)")
    a = ap.parse_args()
    global SET
    shown = subprocess.run(
        [STREAMCLI, "export", "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    )
    SET = "-s" if "--set" in shown.stdout else "-o"
    root = Path(tempfile.mkdtemp(prefix="streamcli-fault-sweep-"))
    world = World(root)
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    try:
        cases = {k: v for k, v in all_cases(a.quick).items() if a.only in k}
        for i, (name, fn) in enumerate(cases.items(), 1):
            t = time.monotonic()
            got = run_case(name, fn, world, root)
            rows.append({"case": name, **asdict(got), "secs": round(time.monotonic() - t, 1)})
            print(f"[{i}/{len(cases)}] {got.kind:6} {name} ({time.monotonic() - t:.0f} s)", file=sys.stderr, flush=True)
    finally:
        world.close()
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}", file=sys.stderr)
    counts = Counter(r["kind"] for r in rows)
    if a.json:
        print(json.dumps({"counts": {k: counts.get(k, 0) for k in KINDS}, "cases": rows}, indent=1))
    else:
        print(f"{len(rows)} cases in {time.monotonic() - t0:.0f} s")
        print("  ".join(f"{k} {counts.get(k, 0)}" for k in KINDS))
        by_group = Counter((r["case"].split("/")[0], r["kind"]) for r in rows)
        groups = sorted({g for g, _ in by_group})
        print(f"{'group':14}" + "".join(f"{k:>8}" for k in KINDS))
        for g in groups:
            print(f"{g:14}" + "".join(f"{by_group.get((g, k), 0):>8}" for k in KINDS))
        for r in rows:
            if r["kind"] != "clean":
                print(f"{r['kind']:6} {r['case']}: {r['detail']}")
    return 1 if any(counts.get(k) for k in ("defect", "loss", "leak", "hang")) else 0


if __name__ == "__main__":
    sys.exit(main())
