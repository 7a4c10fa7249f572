"""Hostile event files and a hostile cache: nothing cut short, damaged or stale is taken for a whole recording.

A file that ends inside a record (or holds only its header, or nothing, or is another format under the suffix)
is an ``EventFileError`` naming the file and the byte; a coordinate off the sensor is one naming the event; a
cache entry that does not read back whole, or belongs to an older state of the file, is rebuilt. The last test
sweeps these faults over the formats and counts the outcomes. Vendor files are written with faery (the optional
extra ``events``); those cases are skipped without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _events_fakes import H, W, histogram_ref, recording, windows_by_mask
from streamcli_sources.events import EventsSource, decoded, windows
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app
from streamcli.errors import EventFileError, SourceError, UnsupportedURLError
from streamcli.source import iter_steps

try:  # imported here, not in a test: h5py's import asks platform for the processor, through a subprocess
    import h5py
except ImportError:
    h5py = None

WINDOW = 40_000
N = 4000
runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default cache folder is this test's, so no test finds another's (or the user's) entries."""
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))


def source(path: Path, **kw: object) -> EventsSource:
    kw.setdefault("window_us", WINDOW)
    return load_source("events", path, **kw)  # type: ignore[return-value]


def steps(src: EventsSource, item: str) -> list[np.ndarray]:
    return [np.asarray(s["events"]) for s in iter_steps(src, item)]


def counts(path: Path) -> list[int]:
    """Events per window of ``path`` as the source reads it (a fresh source: what a new run sees)."""
    src = source(path)
    (item,) = src.items()
    return [int(s.sum()) for s in steps(src, item)]


def write(path: Path, ev: np.ndarray, version: str | None = None) -> Path:
    """``ev`` as ``path`` in the format its suffix names (.npy with numpy, vendor formats with faery)."""
    if path.suffix == ".npy":
        np.save(path, ev)
    else:
        pytest.importorskip("faery")
        decoded.write_file(str(path), ev, (H, W), version)
    return path


def cut(src: Path, dst: Path, size: int) -> Path:
    dst.write_bytes(src.read_bytes()[:size])
    return dst


def header_size(path: Path) -> int:
    """Bytes of a Prophesee file's ``%`` header lines (plus, for DAT, its event type and size bytes)."""
    data, pos = path.read_bytes(), 0
    while data[pos : pos + 1] == b"%":
        pos = data.index(b"\n", pos) + 1
    return pos + (2 if path.suffix == ".dat" else 0)


def leftovers(root: Path) -> list[str]:
    """Temporary entries anywhere under ``root`` (a writer that died, or one that did not clean up)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".tmp-*"))


# -- 1. truncated, header-only, empty and foreign files --------------------------------------------------------


def test_an_evt3_file_cut_mid_word_names_the_file_and_the_byte(tmp_path: Path) -> None:
    good = write(tmp_path / "good.raw", recording(0, N), "evt3")
    size = good.stat().st_size
    odd = size // 2 if (size // 2 - header_size(good)) % 2 else size // 2 + 1  # inside a 2-byte word
    half = cut(good, tmp_path / "half.raw", odd)
    with pytest.raises(EventFileError, match=rf"half\.raw: ends at byte {odd}, inside the 2-byte EVT 3\.0 record"):
        source(half).items()


@pytest.mark.parametrize(("name", "version", "word"), [("rec.raw", "evt2", 4), ("rec.dat", None, 8)])
def test_evt2_and_dat_files_that_end_inside_a_record_are_errors(
    tmp_path: Path, name: str, version: str | None, word: int
) -> None:
    good = write(tmp_path / name, recording(1, N), version)
    body = header_size(good)
    end = body + word * 100 + word // 2
    bad = cut(good, tmp_path / f"cut-{name}", end)
    with pytest.raises(
        EventFileError, match=rf"ends at byte {end}, inside the {word}-byte .* at byte {end - word // 2}"
    ):
        source(bad).items()


@pytest.mark.parametrize("name", ["rec.raw", "rec.dat"])
def test_a_header_only_file_is_an_error_not_an_empty_recording(tmp_path: Path, name: str) -> None:
    good = write(tmp_path / name, recording(2, 500), "evt3" if name.endswith(".raw") else None)
    bad = cut(good, tmp_path / f"head-{name}", header_size(good))
    with pytest.raises(EventFileError, match=rf"head-{name}: holds only its \d+-byte header and no events"):
        source(bad).items()


def test_a_zero_byte_raw_and_a_text_file_named_raw_are_errors(tmp_path: Path) -> None:
    pytest.importorskip("faery")
    (tmp_path / "zero.raw").write_bytes(b"")
    with pytest.raises(EventFileError, match=r"zero\.raw: is empty \(0 bytes\)"):
        source(tmp_path / "zero.raw").items()
    (tmp_path / "notes.raw").write_text("shopping list\n" * 200)
    with pytest.raises(EventFileError, match=r"notes\.raw: has no '%' header lines, so it is not a Prophesee EVT"):
        source(tmp_path / "notes.raw").items()


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_a_damaged_file_in_a_folder_fails_its_stream_or_is_skipped_with_the_same_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, workers: int
) -> None:
    recs = tmp_path / "recs"
    recs.mkdir()
    ev = recording(3, N)
    np.save(recs / "a.npy", ev)
    good = write(tmp_path / "b.raw", recording(4, N), "evt3")
    cut(good, recs / "b.raw", good.stat().st_size - 1)
    src = source(recs)
    assert [Path(i).name for i in src.items()] == ["a.npy", "b.raw"]
    with pytest.raises(EventFileError, match=r"b\.raw: ends at byte \d+, inside"):
        src.length(str(recs / "b.raw"))
    with pytest.raises(SourceError, match=r"item 'b\.raw'.*b\.raw: ends at byte"):
        with StreamLoader(src, 2, 4, num_workers=workers) as loader:
            list(loader)
    skipping = StreamLoader(source(recs), 2, 4, on_error="skip", num_workers=workers)
    with caplog.at_level("WARNING", "streamcli"), skipping as loader:
        batches = list(loader)
        assert loader.stats.skipped == 1
    assert any("'b.raw'" in r.getMessage() and "ends at byte" in r.getMessage() for r in caplog.records)
    got = sum(int(np.asarray(b.data["events"]).sum()) for b in batches)
    assert got == len(ev)  # every event of the whole file, none of the cut one


def test_export_of_a_cut_file_exits_non_zero_with_one_line_naming_the_byte(tmp_path: Path) -> None:
    (tmp_path / "recs").mkdir()
    good = write(tmp_path / "recs" / "good.raw", recording(5, N), "evt3")
    half = cut(good, tmp_path / "recs" / "half.raw", good.stat().st_size - 1)
    for target in (half, half.parent):  # the file, and a folder holding it beside a whole one
        out = tmp_path / "outs" / target.name
        result = runner.invoke(app, ["export", "events", str(target), str(out), "--epochs", "1", "-w", "0"])
        assert result.exit_code in (1, 2), result.output
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert "half.raw" in lines[0] and "ends at byte" in lines[0]


def test_a_url_is_refused_naming_local_paths_and_the_download(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedURLError, match=r"'s3://bucket/recs' is a URL.*local files only; download"):
        load_source("events", "s3://bucket/recs")
    result = runner.invoke(app, ["export", "events", "s3://bucket/recs", str(tmp_path / "out"), "--epochs", "1"])
    assert result.exit_code == 2 and "s3://bucket/recs" in result.output and "download" in result.output


# -- 2. coordinates off the sensor ----------------------------------------------------------------------------


def off_sensor(seed: int) -> np.ndarray:
    ev = recording(seed, N).astype([("x", "<i4"), ("y", "<i4"), ("t", "<i8"), ("p", "u1")])
    ev["x"][500], ev["y"][500] = -1, 10
    return ev


@pytest.mark.parametrize("representation", ["histogram", "voxel", "time_surface"])
def test_a_negative_coordinate_is_an_error_naming_the_file_and_the_event(tmp_path: Path, representation: str) -> None:
    np.save(tmp_path / "neg.npy", off_sensor(6))
    with pytest.raises(EventFileError, match=r"neg\.npy: event 500 is at x=-1, y=10"):
        src = source(tmp_path / "neg.npy", representation=representation, sensor_size=(H, W))
        for item in src.items():
            steps(src, item)


def test_coordinates_are_checked_when_windows_are_read_not_only_by_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.save(tmp_path / "neg.npy", off_sensor(7))
    monkeypatch.setattr(windows, "check_coordinates", lambda *a: None)  # as if indexed by a scan that missed it
    src = source(tmp_path / "neg.npy", sensor_size=(H, W))
    (item,) = src.items()
    with pytest.raises(EventFileError, match=r"neg\.npy: event 500 is at x=-1, y=10, outside sensor_size=\(48, 64\)"):
        steps(src, item)
    ev = recording(8, N).astype(off_sensor(0).dtype)
    ev["x"][1234] = W + 3
    np.save(tmp_path / "wide.npy", ev)
    wide = source(tmp_path / "wide.npy", sensor_size=(H, W + 8), downsample=2)
    (item,) = wide.items()
    wide._sensor_hw = (H, W)  # a sensor the file does not fit, as a stale index would leave it
    with pytest.raises(EventFileError, match=r"wide\.npy: event 1234 is at x=67, y=\d+, outside sensor_size"):
        steps(wide, item)


# -- 3. the cache ---------------------------------------------------------------------------------------------


def cache_files(tmp_path: Path, pattern: str) -> list[Path]:
    return sorted((tmp_path / "cache" / "events").glob(pattern))


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def flip_offsets(index: Path) -> None:
    """Flip a byte of the window offsets themselves, inside the index's zip (not a header byte zip ignores)."""
    data = index.read_bytes()
    npy = data.index(b"\x93NUMPY")  # the first member: offsets.npy, stored uncompressed
    flip(index, npy + 10 + int.from_bytes(data[npy + 8 : npy + 10], "little") + 8 * 3 + 1)


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "garbage"])
def test_an_index_that_does_not_read_back_whole_is_rebuilt(tmp_path: Path, damage: str) -> None:
    ev = recording(9, N)
    np.save(tmp_path / "rec.npy", ev)
    want = [len(w) for w in windows_by_mask(ev, WINDOW)]
    assert counts(tmp_path / "rec.npy") == want
    (index,) = cache_files(tmp_path, "index-*.npz")
    size = index.stat().st_size
    if damage == "truncate":
        cut(index, index, size // 2)
    elif damage == "bitflip":
        flip_offsets(index)
    else:
        index.write_bytes(b"\x00" * size)
    assert counts(tmp_path / "rec.npy") == want
    assert counts(tmp_path / "rec.npy") == want  # and the rebuilt entry reads back whole
    with zipfile.ZipFile(index) as z:
        assert z.testzip() is None


@pytest.mark.parametrize("damage", ["bitflip", "truncate", "meta"])
def test_a_damaged_decoded_column_is_decoded_again_not_served(tmp_path: Path, damage: str) -> None:
    path = write(tmp_path / "rec.dat", recording(10, N))
    want = counts(path)
    (folder,) = cache_files(tmp_path, "decoded-*")
    col = folder / "x.bin"
    stat = col.stat()
    if damage == "bitflip":  # the same size and mtime: only the checksum tells
        flip(col, 2 * 777)
        os.utime(col, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif damage == "truncate":  # mmap length is greater than file size, without the check
        cut(col, col, stat.st_size // 2)
    else:
        (folder / "meta.json").write_text('{"count": -5')
    src = source(path, representation="raw", capacity=N)
    xs = [np.asarray(s["events"])[: int(s["count"]), 0] for s in iter_steps(src, src.items()[0])]
    np.testing.assert_array_equal(np.concatenate(xs), recording(10, N)["x"])
    assert counts(path) == want
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.parametrize("name", ["rec.npy", "rec.dat"])
def test_an_edit_that_keeps_the_size_and_puts_the_mtime_back_is_not_served_stale(tmp_path: Path, name: str) -> None:
    ev = recording(11, N)
    path = write(tmp_path / name, ev)
    before = path.stat()
    assert counts(path) == [len(w) for w in windows_by_mask(ev, WINDOW)]
    edited = ev.copy()
    if name.endswith(".npy"):  # windows move: a stale index would cut them where they were
        edited["t"] = np.sort(edited["t"] - (edited["t"] - edited["t"][0]) // 3)
    else:  # the same records with other polarities: a stale decoded copy would keep the old ones
        edited["p"] = 1 - edited["p"]
    write(path, edited)
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    src = source(path)
    got = steps(src, src.items()[0])
    want = windows_by_mask(edited, WINDOW)
    assert len(got) == len(want)
    for s, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(s, histogram_ref(w))


def test_a_killed_writers_half_entries_are_never_read_and_are_swept(tmp_path: Path) -> None:
    pytest.importorskip("faery")
    events = tmp_path / "cache" / "events"
    events.mkdir(parents=True)
    dead = 2**22 - 3
    try:
        os.kill(dead, 0)
        pytest.skip(f"pid {dead} is alive here")
    except ProcessLookupError:
        pass
    prefix = f".tmp-{socket.gethostname()}-{dead}-"
    (events / f"{prefix}abc").mkdir()
    (events / f"{prefix}abc" / "t.bin").write_bytes(b"\x00" * 10)
    (events / f"{prefix}def.npz").write_bytes(b"PK\x03\x04half")
    theirs = events / ".tmp-otherhost-1-ghi.npz"  # another machine's writer may be alive: left alone
    theirs.write_bytes(b"")
    ev = recording(12, N)
    assert counts(write(tmp_path / "rec.raw", ev)) == [len(w) for w in windows_by_mask(ev, WINDOW)]
    assert leftovers(tmp_path / "cache") == [str(theirs.relative_to(tmp_path / "cache"))]


KILLED_WRITER = """
import sys, time, types
from streamcli_sources.events import decoded
real = decoded.zlib.crc32
def crc32(data, crc=0):
    if crc32.calls == 1:  # the first column is written, the others are not
        print("writing", flush=True)
        time.sleep(120)
    crc32.calls += 1
    return real(data, crc)
crc32.calls = 0
decoded.zlib = types.SimpleNamespace(crc32=crc32)
decoded.decode(sys.argv[1], sys.argv[2])
"""


@pytest.mark.slow
def test_a_decode_killed_while_writing_leaves_no_entry_that_is_read_and_its_temporary_goes(tmp_path: Path) -> None:
    ev = recording(16, N)
    path = write(tmp_path / "rec.raw", ev, "evt3")
    cache = tmp_path / "cache"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path), str(cache)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"  # blocks until it is mid-write
    finally:
        child.kill()
        child.wait(timeout=30)
    assert leftovers(cache) and not cache_files(tmp_path, "decoded-*")  # killed mid-write, nothing published
    assert counts(path) == [len(w) for w in windows_by_mask(ev, WINDOW)]
    assert leftovers(cache) == []


# -- 4. rough messages ----------------------------------------------------------------------------------------


def test_faerys_own_errors_name_the_file_and_what_to_do(tmp_path: Path) -> None:
    good = write(tmp_path / "rec.aedat4", recording(13, N))
    half = cut(good, tmp_path / "half.aedat4", good.stat().st_size // 2)
    with pytest.raises(EventFileError, match=r"half\.aedat4: faery cannot decode it \(failed to fill whole buffer\): "
                       r"it ends at byte \d+ inside a record, so it is truncated; copy it again"):  # fmt: skip
        source(half).items()
    ev = recording(14, N)
    ev["x"][100] = W + 5
    wide = tmp_path / "wide.raw"
    decoded.write_file(str(wide), ev, (H, 80), "evt3")
    head = header_size(wide)
    data = wide.read_bytes()
    wide.write_bytes(data[:head].replace(b"80", b"64") + data[head:])  # a header that says a narrower sensor
    with pytest.raises(EventFileError, match=r"wide\.raw: faery cannot decode it \(x overflow.*outside the sensor"):
        source(wide).items()


@pytest.mark.parametrize(
    ("name", "damage", "match"),
    [
        ("rec.npy", "half", r"rec\.npy: not a whole \.npy file \(it ends at byte \d+ but its header promises \d+"),
        ("rec.npy", "shape", r"rec\.npy: not a whole \.npy file \(\w+Error: "),
        ("rec.h5", "half", r"rec\.h5: not a whole HDF5 file \(\d+ bytes; h5py: Unable to synchronously open"),
    ],
)
def test_numpy_and_h5py_errors_name_the_file_and_the_fix(tmp_path: Path, name: str, damage: str, match: str) -> None:
    ev = recording(15, N)
    path = tmp_path / name
    if name.endswith(".h5"):
        if h5py is None:
            pytest.skip("needs h5py (pip install 'streamcli[events]')")
        with h5py.File(path, "w") as f:
            for k in "xytp":
                f.create_dataset(k, data=ev[k])
    else:
        np.save(path, ev)
    data = path.read_bytes()
    if damage == "half":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(data.replace(f"({N},)".encode(), f"(-{N // 10},)".encode(), 1))
    with pytest.raises(EventFileError, match=match + r".*copy it again"):
        source(path).items()


# -- the sweep ------------------------------------------------------------------------------------------------

Fault = Callable[[Path], Path]  # makes the hostile file (or cache) under a folder, returns the file to read


def _vendor(name: str, version: str | None, size: Callable[[Path], int]) -> Fault:
    def make(tmp: Path) -> Path:
        good = write(tmp / f"good-{name}", recording(20, N), version)
        return cut(good, tmp / name, size(good))

    return make


def _bytes(name: str, data: bytes) -> Fault:
    def make(tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


def _mid(word: int, frac: float) -> Callable[[Path], int]:
    """An offset ``frac`` into the file's records, ``word // 2`` bytes into one (never on a record boundary)."""

    def at(p: Path) -> int:
        head = header_size(p)
        k = int((p.stat().st_size - head) // word * frac)
        return head + k * word + max(1, word // 2)

    return at


GARBAGE = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
TEXT = b"this is not an event recording\n" * 100
ERRORS: dict[str, Fault] = {
    **{
        f"{v}-cut-{f}": _vendor("rec.raw", v, _mid(w, f))
        for v, w in (("evt3", 2), ("evt2", 4))
        for f in (0.0, 0.37, 0.5, 0.99)
    },
    **{f"dat-cut-{f}": _vendor("rec.dat", None, _mid(8, f)) for f in (0.0, 0.37, 0.5, 0.99)},
    "evt3-cut-last-byte": _vendor("rec.raw", "evt3", lambda p: p.stat().st_size - 1),
    "evt3-cut-in-header": _vendor("rec.raw", "evt3", lambda p: header_size(p) // 2),
    "dat-cut-in-header": _vendor("rec.dat", None, lambda p: header_size(p) // 2),
    "aedat4-cut-half": _vendor("rec.aedat4", None, lambda p: p.stat().st_size // 2),
    "aedat4-cut-17": _vendor("rec.aedat4", None, lambda p: 17),
    "evt3-header-only": _vendor("rec.raw", "evt3", header_size),
    "evt2-header-only": _vendor("rec.raw", "evt2", header_size),
    "dat-header-only": _vendor("rec.dat", None, header_size),
    "dat-header-only-no-type": _vendor("rec.dat", None, lambda p: header_size(p) - 2),
    "es-header-only": _vendor("rec.es", None, lambda p: 20),
    **{f"zero{s}": _bytes(f"zero{s}", b"") for s in (".raw", ".dat", ".es", ".aedat4", ".npy", ".h5")},
    **{f"garbage{s}": _bytes(f"garbage{s}", GARBAGE) for s in (".raw", ".dat", ".es", ".aedat4", ".npy", ".h5")},
    **{f"text{s}": _bytes(f"text{s}", TEXT) for s in (".raw", ".dat", ".es", ".aedat4", ".npy", ".h5")},
    "npy-cut-half": lambda tmp: cut(write(tmp / "g.npy", recording(21, N)), tmp / "rec.npy", 26_000),
    "npy-negative-x": lambda tmp: _saved(tmp / "rec.npy", off_sensor(22)),
}


def _saved(path: Path, ev: np.ndarray) -> Path:
    np.save(path, ev)
    return path


def _tamper(name: str, damage: Callable[[Path, Path], None]) -> Fault:
    """A whole file read once (so the cache holds its entries), then ``damage(file, cache folder)``."""

    def make(tmp: Path) -> Path:
        path = write(tmp / name, recording(23, N))
        counts(path)
        damage(path, tmp / "cache" / "events")
        return path

    return make


def _each(pattern: str, act: Callable[[Path], object]) -> Callable[[Path, Path], None]:
    def damage(_: Path, cache: Path) -> None:
        found = sorted(cache.glob(pattern))
        assert found, pattern
        for p in found:
            act(p)

    return damage


def _same_size_edit(path: Path, _: Path) -> None:
    st = path.stat()
    ev = recording(23, N)
    ev["p"] = 1 - ev["p"]
    write(path, ev)
    assert path.stat().st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


WHOLE: dict[str, Fault] = {  # hostile caches: the file itself is whole and must read as it is
    "index-truncated": _tamper("rec.dat", _each("index-*.npz", lambda p: cut(p, p, p.stat().st_size // 3))),
    "index-bitflip": _tamper("rec.dat", _each("index-*.npz", flip_offsets)),
    "index-empty": _tamper("rec.npy", _each("index-*.npz", lambda p: p.write_bytes(b""))),
    "bin-bitflip": _tamper("rec.raw", _each("decoded-*/t.bin", lambda p: flip(p, 8 * 999 + 1))),
    "bin-truncated": _tamper("rec.raw", _each("decoded-*/y.bin", lambda p: cut(p, p, 100))),
    "bin-longer": _tamper("rec.raw", _each("decoded-*/p.bin", lambda p: p.write_bytes(p.read_bytes() + b"\x01"))),
    "meta-garbage": _tamper("rec.es", _each("decoded-*/meta.json", lambda p: p.write_text("{"))),
    "same-size-edit-restored-mtime": _tamper("rec.dat", _same_size_edit),
}


def _want(case: str) -> np.ndarray:
    """The events the file holds, as (N, 4) rows x, y, t, p."""
    ev = recording(23, N)
    if case.startswith("same-size"):
        ev["p"] = 1 - ev["p"]
    return np.stack([ev[f].astype(np.int64) for f in "xytp"], axis=1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", [*ERRORS, *WHOLE])
def test_fault_sweep_over_event_formats_and_the_cache(tmp_path: Path, case: str) -> None:
    """Every hostile file is an ``EventFileError`` naming it (a defect if another error, a loss if it reads);
    every hostile cache reads the file as it is (a loss if not); no temporary is left (a leak); none hangs."""
    if case.endswith(".h5") and h5py is None:
        pytest.skip("needs h5py (pip install 'streamcli[events]')")
    pytest.importorskip("faery")
    if case in ERRORS:
        path = ERRORS[case](tmp_path)
        with pytest.raises(EventFileError) as info:
            src = source(path)
            for item in src.items():
                steps(src, item)
        assert path.name in str(info.value)
        assert "ends at byte" in str(info.value) or "-cut-" not in case or case.startswith(("aedat4", "npy"))
    else:
        path = WHOLE[case](tmp_path)
        src = source(path, representation="raw", capacity=N)
        (item,) = src.items()
        got = [np.asarray(s["events"])[: int(s["count"])] for s in iter_steps(src, item)]
        np.testing.assert_array_equal(np.concatenate(got), _want(case))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("t0", [37 * 4096, 37 * 4096 + 100])
def test_an_evt3_file_whose_first_data_byte_is_a_percent_sign_reads_whole(tmp_path: Path, t0: int) -> None:
    """A header without ``% end`` is told from data by its text: a first TIME_HIGH word of 0x8025 starts with
    ``%`` (0x25), and reading it as a header line cut the recording short or called it truncated."""
    ev = recording(0, 500, t0=t0)
    path = write(tmp_path / "rec.raw", ev, "evt3")
    data = path.read_bytes()
    header = data.index(b"% geometry")
    header = data.index(b"\n", header) + 1
    assert data[header : header + 1] == b"%"  # the case: the first data byte is a '%'
    assert decoded._header_end(str(path), data[:4096], len(data), "an EVT file") == header
    assert sum(counts(path)) == len(ev)
