"""The ``lerobot`` source on small LeRobot datasets of both layouts (v2.1, v3.0) built from a real clip, whose frames
carry their global ``index`` drawn as blocks (``benchmarks.lerobot_data.mark``), so each step's frame can be read
back and checked against its row."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _invariants import to_numpy
from _resume import assert_same, check_resume, run_epochs
from conftest import require_shared
from typer.testing import CliRunner

from benchmarks.lerobot_data import (
    CAMERA,
    Episode,
    encode,
    make_episodes,
    read_mark,
    state_episodes,
    write_v21,
    write_v30,
)
from streamcli import Field, ShardReader, StreamLoader, export, load_source
from streamcli.cli import app
from streamcli.source import has_costly_steps, iter_steps

LENGTHS = [7, 12, 5, 9]
FPS = 10
HW = (64, 112)
B, T = 2, 4
FIELDS = ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index")


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    return make_episodes(require_shared("video") / "bikes.mp4", LENGTHS, HW)


@pytest.fixture(scope="module")
def datasets(episodes: list[Episode], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lerobot")
    return {
        "v2.1": write_v21(root / "v21", episodes, FPS),
        "v3.0": write_v30(root / "v30", episodes, FPS, per_file=3),  # episodes 0-2 share a file, 3 has its own
    }


def steps_of(root: Path, **kw: Any) -> list[list[dict[str, np.ndarray]]]:
    source = load_source("lerobot", str(root), **kw)
    return [[{k: np.asarray(v) for k, v in s.items()} for s in iter_steps(source, i)] for i in source.items()]


def starts() -> list[int]:
    return [sum(LENGTHS[:e]) for e in range(len(LENGTHS))]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_each_step_holds_its_own_row_and_the_frame_at_its_time(
    version: str, datasets: dict[str, Path], episodes: list[Episode]
) -> None:
    source = load_source("lerobot", str(datasets[version]))
    assert [source.length(i) for i in source.items()] == LENGTHS
    assert {f.name: (f.shape, f.np_dtype.name) for f in source.fields()} == {
        CAMERA: ((3, *HW), "uint8"),
        "observation.state": ((6,), "float32"),
        "action": ((6,), "float32"),
        "timestamp": ((1,), "float32"),
        **{k: ((1,), "int64") for k in ("frame_index", "episode_index", "index", "task_index")},
    }
    assert has_costly_steps(source)
    for e, steps in enumerate(steps_of(datasets[version])):
        ep = episodes[e]
        assert len(steps) == LENGTHS[e], f"episode {e}"
        for j, s in enumerate(steps):
            assert int(s["index"][0]) == starts()[e] + j and int(s["frame_index"][0]) == j
            assert int(s["episode_index"][0]) == e and int(s["task_index"][0]) == ep.task
            np.testing.assert_array_equal(s["observation.state"], ep.state[j])
            np.testing.assert_array_equal(s["action"], ep.action[j])
            assert read_mark(s[CAMERA]) == starts()[e] + j, f"episode {e} step {j} got another frame"
            # the rest of the frame is the real clip's, near losslessly: not a frame of another time
            diff = np.abs(s[CAMERA].astype(int) - ep.frames[j].transpose(2, 0, 1).astype(int))
            assert diff[:, 16:].mean() < 3, f"episode {e} step {j}"


@pytest.mark.slow
def test_v21_and_v30_of_the_same_episodes_give_the_same_fields(datasets: dict[str, Path]) -> None:
    a, b = steps_of(datasets["v2.1"]), steps_of(datasets["v3.0"])
    assert [len(s) for s in a] == [len(s) for s in b] == LENGTHS
    for ea, eb in zip(a, b, strict=True):
        for sa, sb in zip(ea, eb, strict=True):
            for k in FIELDS:
                np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
            assert read_mark(sa[CAMERA]) == read_mark(sb[CAMERA])


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_a_stream_opened_at_a_step_continues_exactly_as_a_whole_read(version: str, datasets: dict[str, Path]) -> None:
    source = load_source("lerobot", str(datasets[version]))
    whole = steps_of(datasets[version])
    for item, start in ((1, 5), (2, 1), (3, 8)):
        got = list(iter_steps(source, item, start))
        assert len(got) == LENGTHS[item] - start
        for g, w in zip(got, whole[item][start:], strict=True):
            for k in (*FIELDS, CAMERA):
                np.testing.assert_array_equal(np.asarray(g[k]), w[k], err_msg=f"{k} from step {start}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["opencv", "pyav"])
def test_both_backends_and_a_size_give_each_row_its_frame(backend: str, datasets: dict[str, Path]) -> None:
    steps = steps_of(datasets["v3.0"], backend=backend)
    assert [read_mark(s[CAMERA]) for ep in steps for s in ep] == list(range(sum(LENGTHS)))
    small = steps_of(datasets["v3.0"], backend=backend, size=(32, 56))
    assert small[3][0][CAMERA].shape == (3, 32, 56)
    assert [int(s["index"][0]) for ep in small for s in ep] == list(range(sum(LENGTHS)))


def epoch(root: Path, workers: int, **kw: Any) -> list[dict[str, np.ndarray]]:
    with StreamLoader(load_source("lerobot", str(root)), B, T, num_workers=workers, seed=3, shuffle=True, **kw) as ld:
        planned = len(ld)  # lengths known from the metadata: this epoch's batches, planned before it runs
        batches = run_epochs(ld, 1)
        assert planned == len(batches)
        return batches


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_every_episode_is_delivered_exactly_once_as_one_stream(version: str, datasets: dict[str, Path]) -> None:
    seen: dict[int, list[int]] = {}
    for batch in epoch(datasets[version], 0):
        valid = batch["valid"]
        for t, b in zip(*np.nonzero(valid), strict=True):
            stream, pos = int(batch["stream"][t, b]), int(batch["position"][t, b])
            assert int(batch["index"][t, b, 0]) == starts()[stream] + pos
            assert int(batch["episode_index"][t, b, 0]) == stream
            assert read_mark(batch[CAMERA][t, b]) == starts()[stream] + pos
            assert bool(batch["is_first"][t, b]) == (pos == 0)
            seen.setdefault(stream, []).append(pos)
    assert sorted(seen) == list(range(len(LENGTHS)))
    assert all(seen[e] == list(range(n)) for e, n in enumerate(LENGTHS)), "each episode once, in order"


@pytest.mark.slow
def test_zero_and_two_workers_give_identical_batches(datasets: dict[str, Path]) -> None:
    assert_same(epoch(datasets["v3.0"], 0), epoch(datasets["v3.0"], 2), "0 vs 2 workers")


@pytest.mark.slow
def test_resume_is_exact_in_and_across_episodes(datasets: dict[str, Path]) -> None:
    root = datasets["v3.0"]
    check_resume(lambda: load_source("lerobot", str(root)), B, T, cuts=[2, 7], seed=5, shuffle=True)
    check_resume(lambda: load_source("lerobot", str(root)), B, T, cuts=[4], workers_before=2, seed=5, shuffle=True)


@pytest.mark.slow
def test_an_episode_whose_video_is_shorter_than_its_frames_ends_with_a_warning_naming_it(
    episodes: list[Episode], tmp_path: Path
) -> None:
    root = write_v21(tmp_path / "short", episodes, FPS)
    video = root / f"videos/chunk-000/{CAMERA}/episode_000001.mp4"
    encode(video, episodes[1].frames[:8], FPS)  # 8 frames for 12 rows
    source = load_source("lerobot", str(root))
    with pytest.warns(RuntimeWarning, match=r"episode 1, camera observation\.images\.top.*step 8 of 12.*ends") as w:
        got = list(iter_steps(source, 1))
    assert str(video) in str(w[0].message) and "\n" not in str(w[0].message)
    assert [read_mark(np.asarray(s[CAMERA])) for s in got] == [starts()[1] + j for j in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(iter_steps(source, 0))) == LENGTHS[0]  # the others are whole
    video.unlink()
    with pytest.raises(ValueError, match=r"episode_000001.mp4' does not exist: episode 1's observation.images.top"):
        list(iter_steps(source, 1))


@pytest.mark.slow
def test_cameras_picks_the_decoded_videos_and_none_decodes_nothing(datasets: dict[str, Path]) -> None:
    source = load_source("lerobot", str(datasets["v3.0"]), cameras="")
    assert CAMERA not in {f.name for f in source.fields()} and not has_costly_steps(source)
    blocks = list(source.open(2))
    assert len(blocks) == 1 and len(blocks[0]["index"]) == LENGTHS[2]  # the episode's rows in one block
    with pytest.raises(ValueError, match=r"'observation.images.side' is no video feature of .*info.json"):
        load_source("lerobot", str(datasets["v3.0"]), cameras=["observation.images.side"])


# -- no video: fast ------------------------------------------------------------------------------------------


@pytest.fixture
def states(tmp_path: Path) -> dict[str, Path]:
    eps = state_episodes([6, 3, 4])
    return {
        "v2.1": write_v21(tmp_path / "v21", eps, FPS, with_video=False),
        "v3.0": write_v30(tmp_path / "v30", eps, FPS, per_file=2, with_video=False),
    }


def test_a_dataset_without_cameras_reads_its_rows_per_episode_from_row_groups(states: dict[str, Path]) -> None:
    a, b = steps_of(states["v2.1"]), steps_of(states["v3.0"])
    assert [len(s) for s in a] == [len(s) for s in b] == [6, 3, 4]
    for ea, eb in zip(a, b, strict=True):
        for sa, sb in zip(ea, eb, strict=True):
            assert sa.keys() == sb.keys() == set(FIELDS)
            for k in FIELDS:
                np.testing.assert_array_equal(sa[k], sb[k])
    assert [int(s["index"][0]) for ep in b for s in ep] == list(range(13))
    assert pq.ParquetFile(states["v3.0"] / "data/chunk-000/file-000.parquet").num_row_groups == 2


def one_line_error(root: Path, match: str, **kw: Any) -> str:
    with pytest.raises(ValueError, match=match) as err:
        source = load_source("lerobot", str(root), **kw)
        for i in source.items():
            list(iter_steps(source, i))
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("key", ["fps", "features", "codebase_version", "data_path"])
def test_an_info_json_without_a_field_is_a_one_line_error_naming_it(states: dict[str, Path], key: str) -> None:
    info_path = states["v3.0"] / "meta/info.json"
    info = json.loads(info_path.read_text())
    del info[key]
    info_path.write_text(json.dumps(info))
    assert str(info_path) in one_line_error(states["v3.0"], f"has no '{key}'")


def test_damaged_datasets_are_one_line_errors_naming_the_file(states: dict[str, Path], tmp_path: Path) -> None:
    one_line_error(tmp_path, r"meta/info.json' does not exist")
    (states["v2.1"] / "data/chunk-000/episode_000001.parquet").unlink()
    one_line_error(states["v2.1"], r"episode_000001.parquet' does not exist: episode 1's frames")
    shutil.rmtree(states["v3.0"] / "meta/episodes")
    one_line_error(states["v3.0"], r"no meta/episodes/chunk-XXX/file-YYY.parquet under")
    info_path = states["v2.1"] / "meta/info.json"
    info = json.loads(info_path.read_text())
    info["codebase_version"] = "v1.6"
    info_path.write_text(json.dumps(info))
    one_line_error(states["v2.1"], r"codebase_version 'v1.6' is not read")
    with pytest.raises(ValueError, match="local folders only"):
        load_source("lerobot", "s3://bucket/pusht")


def test_rows_that_hold_another_episode_are_refused(states: dict[str, Path]) -> None:
    meta = states["v3.0"] / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(meta).to_pylist()
    table[0]["dataset_from_index"], table[0]["dataset_to_index"] = 3, 9  # into episode 1's rows
    table[1]["dataset_from_index"], table[1]["dataset_to_index"] = 0, 3
    pq.write_table(pa.Table.from_pylist(table), meta)
    one_line_error(states["v3.0"], r"file-000.parquet': rows 3 to 9 hold episode \[0, 1\], not episode 0")


def test_field_names_may_be_dotted_but_not_begin_with_flag() -> None:
    assert Field("observation.state", (6,), "float32").name == "observation.state"
    for bad in ("flag.valid", "a..b", ".a", "a.", "a-b", "observation.1"):
        with pytest.raises(ValueError, match="dotted identifiers"):
            Field(bad, (), "float32")


def test_dotted_field_names_go_through_export_and_replay(states: dict[str, Path], tmp_path: Path) -> None:
    source = load_source("lerobot", str(states["v3.0"]))
    with StreamLoader(source, B, T, seed=2) as ld:
        want = run_epochs(ld, 1)
    with StreamLoader(load_source("lerobot", str(states["v3.0"])), B, T, seed=2) as ld:
        export(ld, tmp_path / "out")
    got = [to_numpy(b) for b in ShardReader(tmp_path / "out")]
    assert_same(want, got, "export of dotted names")
    assert {f.name for f in ShardReader(tmp_path / "out").fields} == set(FIELDS)


def test_an_image_feature_is_decoded_from_its_png_bytes(states: dict[str, Path]) -> None:
    root = states["v2.1"]
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.image"] = {"dtype": "image", "shape": [8, 10, 3], "names": ["height", "width", "c"]}
    info_path.write_text(json.dumps(info))
    rng = np.random.default_rng(4)
    pictures = {}
    for e in range(3):
        path = root / f"data/chunk-000/episode_{e:06d}.parquet"
        table = pq.read_table(path)
        pictures[e] = rng.integers(0, 256, (table.num_rows, 8, 10, 3), dtype=np.uint8)
        png = [{"bytes": cv2.imencode(".png", p[..., ::-1])[1].tobytes(), "path": None} for p in pictures[e]]
        pq.write_table(table.append_column("observation.image", pa.array(png)), path)
    source = load_source("lerobot", str(root), size=(4, 5))
    assert Field("observation.image", (3, 4, 5), "uint8", display="image") in source.fields()
    assert has_costly_steps(source)
    for e, steps in enumerate(steps_of(root)):
        assert len(steps) == len(pictures[e])
        for s, p in zip(steps, pictures[e], strict=True):
            np.testing.assert_array_equal(s["observation.image"], p.transpose(2, 0, 1))


def test_the_cli_lists_previews_and_exports_a_lerobot_dataset(states: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["plugins", "lerobot", "--json"])
    assert listed.exit_code == 0, listed.output
    assert {o["name"] for o in json.loads(listed.output)["options"]} >= {"size", "cameras", "backend", "index"}
    root = str(states["v2.1"])
    shown = runner.invoke(app, ["preview", root, "-b", "2", "-t", "4", "-w", "0", "--batches", "1"])
    assert shown.exit_code == 0, shown.output
    assert "episode_000000" in shown.output and "observation.state" in shown.output
    out = tmp_path / "exported"
    done = runner.invoke(app, ["export", "lerobot", root, str(out), "-b", "2", "-t", "4", "-w", "0"])
    assert done.exit_code == 0, done.output
    assert sum(int(b.valid.sum()) for b in ShardReader(out)) == 13
    bad = runner.invoke(app, ["preview", "lerobot", str(tmp_path), "-w", "0", "--batches", "1"])
    assert bad.exit_code != 0 and "info.json' does not exist" in bad.output


def test_the_preview_shows_the_state_as_a_sparkline_per_dimension_over_the_episode(states: dict[str, Path]) -> None:
    from streamcli.cli.preview import frame_from_batch, spark
    from streamcli.cli.preview.ansi import RESET
    from streamcli.cli.preview.grid import CellLayout, cell_lines

    source = load_source("lerobot", str(states["v3.0"]))
    shows = {f.name: f.display for f in source.fields()}
    assert shows["observation.state"] == shows["action"] == "series" and shows["timestamp"] == "other"
    with StreamLoader(source, 2, 8, num_workers=0) as loader:
        batch = next(iter(loader))
        frame = frame_from_batch(batch, loader.stream_name, displays=shows)
    lines = [ln.replace(RESET, "").replace("\x1b[2m", "") for ln in cell_lines(frame.rows[0], CellLayout(40, 0), "256")]
    want = to_numpy(batch)
    valid, stream = want["valid"][:, 0], want["stream"][:, 0]
    ours = valid & (stream == stream[np.flatnonzero(valid)[-1]])  # the row's current episode in this batch
    state = want["observation.state"][:, 0][ours]
    assert len(state) >= 2 and state.shape[1] == 6
    for d in range(6):
        line = next(ln for ln in lines if ln.startswith(f"state[{d}] "))
        assert line.split() == [f"state[{d}]", spark(state[:, d]), f"{state[-1, d]:.3g}"]
    assert any(ln.startswith("action[5] ") for ln in lines)
    shown = CliRunner().invoke(app, ["preview", str(states["v2.1"]), "-b", "2", "-t", "4", "-w", "0", "--batches", "1"])
    assert shown.exit_code == 0 and "state[5]" in shown.output, shown.output
