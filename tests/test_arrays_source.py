"""The ``arrays`` source over recordings made of real audio (``_sensor_data``), stored as ``.npy``, ``.npz`` (plain and
compressed), HDF5 groups and Zarr groups: every recording one stream, delivered once, each step its rows."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from _resume import check_resume
from _sensor_data import CHANNELS, recordings, streams_of
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app
from streamcli.source import iter_steps

B, T = 3, 50


def write_npy(folder: Path, recs: list[np.ndarray]) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = [folder / f"rec_{i:02d}.npy" for i in range(len(recs))]
    for p, r in zip(paths, recs, strict=True):
        np.save(p, r)
    return paths


def write_h5(path: Path, recs: list[np.ndarray]) -> None:
    """One group per recording (chunked, gzip), its row numbers beside it, and a metadata group that is no stream."""
    with h5py.File(path, "w") as f:
        for i, r in enumerate(recs):
            g = f.create_group(f"session/run_{i:02d}")
            g.create_dataset("imu.raw", data=r, chunks=(64, CHANNELS), compression="gzip")
            g.create_dataset("row", data=np.arange(len(r), dtype=np.int64), chunks=(37,))
        f.create_group("meta").create_dataset("names", data=np.array([b"mic"] * 3))


def test_every_npy_file_is_one_stream_whose_steps_are_its_rows(tmp_path: Path) -> None:
    recs = recordings()
    write_npy(tmp_path / "npy", recs)
    src = load_source("arrays", tmp_path / "npy")
    assert [Path(i).name for i in src.items()] == [f"rec_{i:02d}.npy" for i in range(len(recs))]
    assert [(f.name, f.shape, f.np_dtype.name) for f in src.fields()] == [("data", (CHANNELS,), "float32")]
    assert [src.length(i) for i in src.items()] == [len(r) for r in recs]
    got = streams_of(src, B, T)
    assert sorted(got) == list(range(len(recs)))
    for k, r in enumerate(recs):
        np.testing.assert_array_equal(got[k]["data"], r)
    blocks = list(src.open(src.items()[2], start=700))  # a resume deep in the file reads from there
    np.testing.assert_array_equal(np.concatenate([b["data"] for b in blocks]), recs[2][700:])


def test_a_step_of_width_rows_drops_the_last_partial_step(tmp_path: Path) -> None:
    recs = recordings(count=2)
    write_npy(tmp_path / "npy", recs)
    src = load_source("arrays", tmp_path / "npy", width=7)
    assert src.fields()[0].shape == (7, CHANNELS)
    assert [src.length(i) for i in src.items()] == [len(r) // 7 for r in recs]
    got = streams_of(src, 2, 16)
    for k, r in enumerate(recs):
        n = len(r) // 7
        np.testing.assert_array_equal(got[k]["data"], r[: n * 7].reshape(n, 7, CHANNELS))


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "compressed"])
def test_npz_arrays_sharing_the_first_axis_are_the_fields(tmp_path: Path, save: object) -> None:
    recs = recordings(count=3)
    for i, r in enumerate(recs):
        arrays = {"mic-raw": r, "level": np.abs(r).max(axis=1), "calibration": np.ones(5)}  # the last: ignored
        save(tmp_path / f"s{i}.npz", **arrays)  # type: ignore[operator]
    src = load_source("arrays", tmp_path)
    assert [(f.name, f.shape) for f in src.fields()] == [("mic_raw", (CHANNELS,)), ("level", ())]
    got = streams_of(src, B, T)
    for k, r in enumerate(recs):
        np.testing.assert_array_equal(got[k]["mic_raw"], r)
        np.testing.assert_array_equal(got[k]["level"], np.abs(r).max(axis=1))
    picked = load_source("arrays", tmp_path, fields="level")  # by name; "mic_raw" would pick the other by field name
    assert [f.name for f in picked.fields()] == ["level"]
    steps = list(iter_steps(picked, picked.items()[1], start=1000))
    np.testing.assert_array_equal([s["level"] for s in steps], np.abs(recs[1]).max(axis=1)[1000:])


def test_each_hdf5_group_of_datasets_is_a_stream_read_across_chunk_boundaries(tmp_path: Path) -> None:
    recs = recordings()
    write_h5(tmp_path / "runs.h5", recs)
    src = load_source("arrays", tmp_path / "runs.h5")
    assert [src.item_name(i) for i in src.items()] == [f"runs.h5:/session/run_{i:02d}" for i in range(len(recs))]
    assert [(f.name, f.shape, f.np_dtype.name) for f in src.fields()] == [
        ("imu.raw", (CHANNELS,), "float32"),
        ("row", (), "int64"),
    ]
    got = streams_of(src, B, T)  # T=50 against chunks of 64 and 37 rows: windows cross blocks
    assert sorted(got) == list(range(len(recs)))
    for k, r in enumerate(recs):
        np.testing.assert_array_equal(got[k]["imu.raw"], r)
        np.testing.assert_array_equal(got[k]["row"], np.arange(len(r)))
    only = load_source("arrays", tmp_path / "runs.h5", fields=["imu.raw"], width=4)  # by field name
    assert [(f.name, f.shape) for f in only.fields()] == [("imu.raw", (4, CHANNELS))]
    win = only.window(only.items()[3])["imu.raw"]
    np.testing.assert_array_equal(win[100:103], recs[3][400:412].reshape(3, 4, CHANNELS))


def test_zarr_groups_are_streams_like_hdf5_groups(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    recs = recordings(count=3)
    root = zarr.open_group(str(tmp_path / "runs.zarr"), mode="w")
    for i, r in enumerate(recs):
        root.create_group(f"ep{i}").create_array("obs", data=r, chunks=(100, CHANNELS))
    src = load_source("arrays", tmp_path / "runs.zarr")
    assert [src.item_name(i) for i in src.items()] == ["runs.zarr:/ep0", "runs.zarr:/ep1", "runs.zarr:/ep2"]
    got = streams_of(src, 2, T)
    for k, r in enumerate(recs):
        np.testing.assert_array_equal(got[k]["obs"], r)


def test_resume_is_exact(tmp_path: Path) -> None:
    recs = recordings()
    write_h5(tmp_path / "runs.h5", recs)
    check_resume(lambda: load_source("arrays", tmp_path / "runs.h5"), B, T, cuts=[2, 41, 77], segment=200)


@pytest.mark.slow
def test_zero_and_two_workers_give_identical_batches(tmp_path: Path) -> None:
    recs = recordings()
    write_npy(tmp_path / "npy", recs)
    write_h5(tmp_path / "runs.h5", recs)
    (tmp_path / "npz").mkdir()
    for i, r in enumerate(recs):  # compressed: loaded once per worker
        np.savez_compressed(tmp_path / "npz" / f"s{i}.npz", mic=r)
    for path in (tmp_path / "npy", tmp_path / "runs.h5", tmp_path / "npz"):
        runs = []
        for workers in (0, 2):
            with StreamLoader(load_source("arrays", path), B, T, num_workers=workers, seed=3) as loader:
                runs.append([{k: v.numpy().copy() for k, v in {**b.data, **b.flags()}.items()} for b in loader])
        assert len(runs[0]) == len(runs[1]) > 10
        for a, b in zip(*runs, strict=True):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{path.name}: {key}")


def test_an_index_keeps_the_recordings_and_their_fields(tmp_path: Path) -> None:
    recs = recordings(count=3)
    write_h5(tmp_path / "runs.h5", recs)
    r = CliRunner().invoke(app, ["index", "arrays", str(tmp_path / "runs.h5"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["items"] == 3
    assert (tmp_path / "runs.h5.streamcli-index.npz").is_file()
    src = load_source("arrays", tmp_path / "runs.h5")
    assert src.streamcli_index is not None and list(src.streamcli_index.lengths) == [len(r) for r in recs]
    got = streams_of(src, B, T)
    for k, rec in enumerate(recs):
        np.testing.assert_array_equal(got[k]["imu.raw"], rec)
    with pytest.raises(Exception, match="stale"):
        load_source("arrays", tmp_path / "runs.h5", width=2)


def test_a_truncated_npy_file_is_named(tmp_path: Path) -> None:
    paths = write_npy(tmp_path / "npy", recordings(count=2))
    with open(paths[1], "r+b") as f:
        f.truncate(f.seek(0, 2) - 100)
    with pytest.raises(ValueError, match=r"rec_01\.npy is truncated: its header says \(1673, 12\) float32"):
        load_source("arrays", tmp_path / "npy")


def test_mismatched_first_axes_and_unknown_fields_are_errors_naming_the_file(tmp_path: Path) -> None:
    rec = recordings(count=1)[0]
    np.savez(tmp_path / "a.npz", mic=rec, level=rec[:-1, 0])
    with pytest.raises(ValueError, match=r"a\.npz: the fields' first axes differ \(mic 1500, level 1499 rows\)"):
        load_source("arrays", tmp_path / "a.npz", fields="mic,level")
    with pytest.raises(ValueError, match=r"a\.npz has no array 'gyro'; it has: mic, level"):
        load_source("arrays", tmp_path / "a.npz", fields="gyro")
    write_npy(tmp_path / "npy", [rec, rec[:, :6].copy()])
    with pytest.raises(ValueError, match=r"rec_01\.npy: array 'data' is float32\[6\] a row, but the first"):
        load_source("arrays", tmp_path / "npy")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no file matches"):
        load_source("arrays", tmp_path / "empty")


def test_other_byte_orders_and_fortran_order_read_as_the_values(tmp_path: Path) -> None:
    rec = recordings(count=1)[0]
    np.save(tmp_path / "big.npy", rec.astype(">f4"))
    np.save(tmp_path / "fortran.npy", np.asfortranarray(rec))
    src = load_source("arrays", tmp_path)
    assert src.fields()[0].np_dtype == np.dtype("float32")  # batches hold the machine's order
    for item in src.items():
        np.testing.assert_array_equal(np.concatenate([b["data"] for b in src.open(item)]), rec)
        np.testing.assert_array_equal(src.window(item)["data"][10:20], rec[10:20])


def test_a_bare_path_is_arrays_only_for_arrays_of_numbers(tmp_path: Path) -> None:
    from streamcli_sources.arrays import ArraysSource

    write_npy(tmp_path / "npy", recordings(count=1))
    events = np.zeros(10, dtype=[("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])  # the events source's
    (tmp_path / "events").mkdir()
    np.save(tmp_path / "events" / "rec.npy", events)
    write_h5(tmp_path / "runs.h5", recordings(count=1))
    assert ArraysSource.can_open(str(tmp_path / "npy"))
    assert not ArraysSource.can_open(str(tmp_path / "events"))  # left to the events source
    assert not ArraysSource.can_open(str(tmp_path / "runs.h5"))  # HDF5: name the source


def test_plugins_lists_the_options_with_their_descriptions() -> None:
    for name, options in (("arrays", {"fields", "width", "glob", "index"}), ("table", {"stream_by", "order_by"})):
        r = CliRunner().invoke(app, ["plugins", name, "--json"])
        assert r.exit_code == 0, r.output
        got = {o["name"]: o["description"] for o in json.loads(r.stdout)["options"]}
        assert options <= set(got) and all(got[o] for o in options), got


def test_a_file_written_again_is_read_again(tmp_path: Path) -> None:
    recs = recordings(count=2)
    for k in range(2):  # the second time, each recording negated: cached blocks and loads must not be served
        sign = 1 - 2 * k
        write_h5(tmp_path / "runs.h5", [sign * r for r in recs])
        np.savez_compressed(tmp_path / "one.npz", mic=sign * recs[0])
        for path, field in ((tmp_path / "runs.h5", "imu.raw"), (tmp_path / "one.npz", "mic")):
            src = load_source("arrays", path, index="none")
            np.testing.assert_array_equal(src.window(src.items()[0])[field][5:9], sign * recs[0][5:9])


def test_a_folder_of_npz_files_is_left_to_the_shards_source(tmp_path: Path) -> None:
    from streamcli_sources.arrays import ArraysSource

    (tmp_path / "out").mkdir()
    np.savez(tmp_path / "out" / "shard-00000.npz", x=np.zeros((4, 2)))
    (tmp_path / "out" / "index.json").write_text("{}")
    assert not ArraysSource.can_open(str(tmp_path / "out"))
    assert ArraysSource.can_open(str(tmp_path / "out" / "shard-00000.npz"))  # a file named on its own
