"""Every file format of the events source gives the same windows as a .npy of the same events.

Vendor files (EVT 2.0, EVT 3.0, AEDAT4, DAT, ES) are written by faery's own writer, HDF5 files by h5py; both are
the optional extra ``events`` and these tests are skipped without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _events_fakes import H, W, recording
from streamcli_sources.events import EventsSource, decoded

from streamcli import StreamLoader, load_source
from streamcli.errors import SourceError
from streamcli.source import iter_steps

WINDOW = 30_000


def windows_of(path: Path, cache: Path, **kw: object) -> tuple[EventsSource, list[dict[str, np.ndarray]]]:
    src: EventsSource = load_source("events", path, window_us=WINDOW, cache_dir=str(cache), **kw)  # type: ignore[assignment]
    (item,) = src.items()
    return src, [{k: np.asarray(v) for k, v in s.items()} for s in iter_steps(src, item)]


def assert_same_windows(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> None:
    assert len(a) == len(b) > 5
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        assert all(np.array_equal(x[k], y[k]) for k in x)


@pytest.fixture
def reference(tmp_path: Path) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
    ev = recording(11, 4000)
    np.save(tmp_path / "ref.npy", ev)
    return ev, windows_of(tmp_path / "ref.npy", tmp_path / "cache", representation="voxel", bins=3)[1]


@pytest.mark.parametrize("group", ["", "events"])
def test_hdf5_x_y_t_p_datasets_read_like_the_npy(tmp_path: Path, reference: tuple, group: str) -> None:
    h5py = pytest.importorskip("h5py")
    ev, want = reference
    path = tmp_path / "rec.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group(group) if group else f
        for k in "xytp":
            g.create_dataset(k, data=ev[k], chunks=True)
    src, got = windows_of(path, tmp_path / "cache", representation="voxel", bins=3)
    assert_same_windows(want, got)
    assert src.spec.height == H and src.spec.width == W  # no size in the file: inferred from the events


def test_hdf5_sensor_size_and_t_offset_come_from_the_file(tmp_path: Path, reference: tuple) -> None:
    h5py = pytest.importorskip("h5py")
    ev, want = reference
    path = tmp_path / "dsec.h5"
    with h5py.File(path, "w") as f:  # DSEC's layout: relative times plus an offset
        f.attrs["height"], f.attrs["width"] = 50, 70
        f.create_dataset("t_offset", data=np.int64(ev["t"][0]))
        g = f.create_group("events")
        for k in "xyp":
            g.create_dataset(k, data=ev[k])
        g.create_dataset("t", data=ev["t"] - ev["t"][0])
    src, got = windows_of(path, tmp_path / "cache", representation="voxel", bins=3)
    assert src.fields()[0].shape == (3, 50, 70)
    assert_same_windows([{**w, "events": np.pad(w["events"], ((0, 0), (0, 2), (0, 6)))} for w in want], got)


FAERY_FORMATS = [
    ("evt2.raw", "evt2"),
    ("evt3.raw", "evt3"),
    ("rec.aedat4", None),
    ("rec.dat", "dat2"),
    ("rec.es", None),
]


def write_with_faery(path: Path, ev: np.ndarray, version: str | None, size: tuple[int, int] = (H, W)) -> None:
    faery = pytest.importorskip("faery")
    arr = np.zeros(len(ev), faery.EVENTS_DTYPE)
    arr["t"], arr["x"], arr["y"], arr["on"] = ev["t"], ev["x"], ev["y"], ev["p"].astype(bool)
    faery.events_stream_from_array(arr, dimensions=(size[1], size[0])).to_file(
        str(path), version=version, zero_t0=False
    )


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), FAERY_FORMATS)
def test_vendor_files_written_by_faery_read_like_the_npy(tmp_path: Path, reference: tuple, name: str, version) -> None:
    ev, want = reference
    write_with_faery(tmp_path / name, ev, version)
    src, got = windows_of(tmp_path / name, tmp_path / "cache", representation="voxel", bins=3)
    assert_same_windows(want, got)
    assert (src.spec.height, src.spec.width) == (H, W)


@pytest.mark.slow
def test_a_vendor_file_is_decoded_once_into_the_cache_and_its_sensor_size_is_the_files(
    tmp_path: Path, reference: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    ev, _ = reference
    path = tmp_path / "recs" / "cam.raw"
    path.parent.mkdir()
    write_with_faery(path, ev, "evt3", size=(60, 80))
    src, first = windows_of(path, tmp_path / "cache")
    assert src.fields()[0].shape == (2, 60, 80)
    assert sorted(p.name for p in path.parent.iterdir()) == ["cam.raw"]
    folder = decoded.decoded_folder(str(path), str(tmp_path / "cache"))
    assert (folder / "t.bin").stat().st_size == 8 * len(ev)

    def no_faery(*a: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setattr(decoded, "need", no_faery)  # called only when no decoded copy is cached
    _, again = windows_of(path, tmp_path / "cache")
    assert_same_windows(first, again)


@pytest.mark.slow
def test_evt3_recordings_batch_identically_with_0_and_2_workers(tmp_path: Path) -> None:
    (tmp_path / "recs").mkdir()
    for i in range(3):
        write_with_faery(tmp_path / "recs" / f"r{i}.raw", recording(i, 2000), "evt3")
    runs = []
    for workers in (0, 2):
        src = load_source("events", tmp_path / "recs", window_us=WINDOW, cache_dir=str(tmp_path / "cache"))
        with StreamLoader(src, 2, 5, num_workers=workers, seed=1) as loader:
            runs.append([{k: v.numpy().copy() for k, v in b.data.items()} for b in loader])
    assert len(runs[0]) == len(runs[1]) > 2
    for a, b in zip(*runs, strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_a_vendor_file_with_no_writable_cache_is_a_source_error_naming_the_fix(
    tmp_path: Path, reference: tuple
) -> None:
    ev, _ = reference
    write_with_faery(tmp_path / "cam.raw", ev, "evt3")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(SourceError, match="pass cache_dir= a writable folder"):
        load_source("events", tmp_path / "cam.raw", cache_dir=str(blocker)).items()


def test_hdf5_height_and_width_may_be_scalar_datasets_beside_the_events(tmp_path: Path, reference: tuple) -> None:
    h5py = pytest.importorskip("h5py")
    ev, _ = reference
    path = tmp_path / "gen1.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("events")
        for k in "xytp":
            g.create_dataset(k, data=ev[k])
        g.create_dataset("height", data=np.int64(240))
        g.create_dataset("width", data=np.int64(304))
    src, _ = windows_of(path, tmp_path / "cache")
    assert src.fields()[0].shape == (2, 240, 304)
