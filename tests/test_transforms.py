"""Transforms run in the producers, with the same draw on every step of a stream (``streamcli.transforms``)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _resume import assert_same, check_resume, run_epochs
from _sources import CountingSource
from _transform_fakes import DRAW_HIGH, BlockSource, DrawTransform, ImageSource, WindowSource, WrongShapeTransform
from typer.testing import CliRunner

from streamcli import StreamLoader, StreamSource
from streamcli.cli import app
from streamcli.errors import StepSpecError, TransformError
from streamcli.shards import ShardReader
from streamcli.source import Field
from streamcli.transforms import (
    ColorJitter,
    Compose,
    Context,
    HorizontalFlip,
    RandomCrop,
    Resize,
    parse_transform,
    stream_seed,
)

LENGTHS = [7, 3, 11, 5, 9, 4]
SOURCES: dict[str, Callable[[], StreamSource]] = {
    "steps, lengths (planned rows)": lambda: CountingSource(LENGTHS),
    "window (planned batches)": lambda: WindowSource(LENGTHS),
    "blocks, lengths (planned rows)": lambda: BlockSource(LENGTHS),
    "steps, no lengths (read as planned)": lambda: CountingSource(LENGTHS, report_length=False),
    "blocks, no lengths (read as planned)": lambda: BlockSource(LENGTHS, report_length=False),
}


def draws_of(batches: list[dict[str, np.ndarray]], epochs: list[int]) -> dict[tuple[int, int], set[int]]:
    """(epoch, stream) -> the draws its valid steps carry; asserts each step's ``at`` is its own position."""
    out: dict[tuple[int, int], set[int]] = {}
    for b, epoch in zip(batches, epochs, strict=True):
        valid = b["valid"]
        x, draw, at, ep = b["x"][valid], b["draw"][valid], b["at"][valid], b["ep"][valid]
        assert np.array_equal(at, x[:, 1]), "ctx.position + i is not the step's position in its item"
        assert np.array_equal(ep, np.full(len(ep), epoch)), "ctx.epoch is not the batch's epoch"
        for (item, _), d in zip(x.tolist(), draw.tolist(), strict=True):
            out.setdefault((epoch, item), set()).add(d)
    return out


@pytest.mark.parametrize("make", SOURCES.values(), ids=SOURCES.keys())
def test_every_step_of_a_stream_carries_the_same_draw_from_its_seed(make: Callable[[], StreamSource]) -> None:
    with StreamLoader(make(), 3, 4, seed=5, transform=DrawTransform()) as loader:
        batches, epochs = [], []
        for _ in range(2):
            for batch in loader:
                batches.append({k: v.numpy().copy() for k, v in {**batch.data, **batch.flags()}.items()})
                epochs.append(batch.epoch)
    draws = draws_of(batches, epochs)
    assert sorted(draws) == [(e, i) for e in (0, 1) for i in range(len(LENGTHS))]
    for (epoch, item), got in draws.items():
        want = np.random.default_rng(stream_seed(5, epoch, item)).integers(0, DRAW_HIGH)
        assert got == {want}, f"stream {item} of epoch {epoch} carries draws {got}"
    per_stream = [next(iter(draws[0, i])) for i in range(len(LENGTHS))]
    assert len(set(per_stream)) == len(LENGTHS), "two streams drew the same"
    assert all(draws[0, i] != draws[1, i] for i in range(len(LENGTHS))), "a stream drew the same in two epochs"


def test_the_draw_does_not_depend_on_the_chunking_of_blocks() -> None:
    got = []
    for size in (1, 2, 5):
        with StreamLoader(BlockSource(LENGTHS, size=size), 2, 3, transform=DrawTransform()) as loader:
            got.append(run_epochs(loader, 1))
    assert_same(got[0], got[1], "blocks of 2 against steps")
    assert_same(got[0], got[2], "blocks of 5 against steps")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["steps, lengths (planned rows)", "window (planned batches)", "blocks, no lengths (read as planned)"]
)
def test_batches_with_a_transform_are_identical_for_zero_and_two_workers(name: str) -> None:
    make = SOURCES[name]
    runs = []
    for w in (0, 2):
        with StreamLoader(make(), 4, 3, num_workers=w, transform=DrawTransform()) as loader:
            runs.append(run_epochs(loader, 2))
    assert_same(runs[0], runs[1], "2 workers against in-process")


@pytest.mark.parametrize(
    "make",
    [SOURCES["steps, lengths (planned rows)"], SOURCES["steps, no lengths (read as planned)"]],
    ids=["lengths", "no lengths"],
)
def test_resume_mid_epoch_with_a_transform_is_exact(make: Callable[[], StreamSource]) -> None:
    check_resume(make, 3, 2, cuts=[2, 5], transform=DrawTransform())


@pytest.mark.slow
def test_resume_with_a_transform_from_in_process_to_two_workers_is_exact() -> None:
    check_resume(lambda: ImageSource([5, 8, 3, 6]), 2, 3, cuts=[3], workers_after=2, transform="crop=8x10,flip")


# ---------------------------------------------------------------------------------------------------- built-ins

BUILTINS: dict[str, Any] = {
    "crop": lambda: RandomCrop((8, 10)),
    "flip": lambda: HorizontalFlip(1.0),
    "color": lambda: ColorJitter(brightness=0.3, contrast=0.3),
    "resize": lambda: Resize((6, 20)),
    "compose": lambda: Compose([RandomCrop(9), HorizontalFlip(), ColorJitter(0.2), Resize(5)]),
}


@pytest.mark.parametrize("hwc", [False, True], ids=["CHW", "HWC"])
@pytest.mark.parametrize("make", BUILTINS.values(), ids=BUILTINS.keys())
def test_builtins_return_the_shapes_their_fields_declare_whatever_the_chunking(make: Any, hwc: bool) -> None:
    source = ImageSource([6], hwc=hwc)
    t = pickle.loads(pickle.dumps(make()))  # workers get a pickled copy
    fields = {f.name: f for f in t.fields(source.fields())}
    assert fields["x"] == source.fields()[1]  # a field that is not an image is left alone
    frames = np.stack([source.frame(0, p) for p in range(6)])
    block = {"frame": frames, "x": np.zeros((6, 2), np.int64)}
    whole = t(block, Context(stream=0, position=0, epoch=0, seed=99))
    assert whole["frame"].shape == (6, *fields["frame"].shape) and whole["frame"].dtype == np.uint8
    assert fields["frame"].display == "image"
    parts = [t({k: v[i : i + 2] for k, v in block.items()}, Context(0, i, 0, 99))["frame"] for i in (0, 2, 4)]
    assert np.array_equal(np.concatenate(parts), whole["frame"]), "a block's draw depends on where it was cut"


def test_a_random_crop_is_a_window_of_the_frame_at_one_offset_per_stream() -> None:
    source = ImageSource([4])
    crop = RandomCrop((5, 7))
    crop.fields(source.fields())
    frames = np.stack([source.frame(0, p) for p in range(4)])
    offsets = set()
    for seed in range(20):
        out = crop({"frame": frames}, Context(0, 0, 0, seed))["frame"]
        found = [(y, x) for y in range(12 - 5 + 1) for x in range(16 - 7 + 1)
                 if np.array_equal(frames[:, :, y : y + 5, x : x + 7], out)]  # fmt: skip
        assert len(found) == 1
        offsets.add(found[0])
    assert len(offsets) > 5, "the crop offset hardly varies with the seed"


def test_a_flip_mirrors_the_width_of_chw_and_hwc_frames() -> None:
    for hwc in (False, True):
        source = ImageSource([1], hwc=hwc)
        flip = HorizontalFlip(1.0)
        flip.fields(source.fields())
        frame = source.frame(0, 0)[None]
        out = flip({"frame": frame}, Context(0, 0, 0, 1))["frame"]
        assert np.array_equal(out, frame[:, :, :, ::-1] if not hwc else frame[:, :, ::-1, :])


def test_a_transform_that_breaks_its_fields_is_a_transform_error_naming_the_fix() -> None:
    with StreamLoader(CountingSource([4, 4]), 2, 2, transform=WrongShapeTransform()) as loader:
        want = r"returned field 'x' as int64\[1, 3\].*expects int64\[1, 2\].*declare a changed shape"
        with pytest.raises(TransformError, match=want):
            next(iter(loader))
    assert issubclass(TransformError, StepSpecError)


def test_a_crop_larger_than_the_frame_is_refused_when_the_loader_is_made() -> None:
    with pytest.raises(ValueError, match=r"crop=20x20 is larger than field frame uint8\[3, 12, 16\]"):
        StreamLoader(ImageSource([3]), 1, 2, transform="crop=20")


def test_a_transform_that_cannot_be_pickled_is_refused_with_workers() -> None:
    with pytest.raises(TypeError, match=r"transform .* cannot be pickled"):
        StreamLoader(CountingSource([3]), 1, 2, num_workers=1, transform=lambda block, ctx: block)


@pytest.mark.parametrize("make", [lambda: ImageSource([5, 3, 6]), lambda: ImageSource([5, 3, 6], report_length=False)],
                         ids=["lengths", "no lengths"])  # fmt: skip
def test_a_loader_with_builtins_writes_each_stream_as_one_block_transformed(make: Any) -> None:
    source = make()
    t = "crop=8x10,flip,brightness=0.3,resize=4x5"
    with StreamLoader(source, 2, 3, seed=1, transform=t) as loader:
        assert [(f.name, f.shape) for f in loader.fields] == [("frame", (3, 4, 5)), ("x", (2,))]
        got = run_epochs(loader, 1)
    whole = parse_transform(t)
    whole.fields(source.fields())
    seen = 0
    for b in got:
        for ti, bi in zip(*np.nonzero(b["valid"]), strict=True):
            item, p = b["x"][ti, bi].tolist()
            frames = np.stack([source.frame(item, q) for q in range(source.lengths[item])])
            want = whole({"frame": frames}, Context(item, 0, 0, stream_seed(1, 0, item)))["frame"][p]
            assert np.array_equal(b["frame"][ti, bi], want), f"stream {item} step {p}"
            seen += 1
    assert seen == sum(source.lengths)


# ---------------------------------------------------------------------------------------------------- parsing, CLI


def test_the_cli_spelling_becomes_a_compose_in_order() -> None:
    c = parse_transform("crop=112,flip,brightness=0.2,contrast=0.1,resize=64x48")
    kinds = [type(t) for t in c.transforms]
    assert kinds == [RandomCrop, HorizontalFlip, ColorJitter, ColorJitter, Resize]
    assert c.transforms[0].size == (112, 112) and c.transforms[4].size == (64, 48)
    assert c.transforms[1].p == 0.5 and c.transforms[2].brightness == 0.2 and c.transforms[3].contrast == 0.1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("blur=3", r"unknown transform 'blur=3'; valid: crop=SIZE"),
        ("crop", r"transform 'crop' needs a value: crop=SIZE"),
        ("crop=big", r"transform 'crop=big': the size must be N or HxW"),
        ("flip,,crop=3", r"has an empty entry"),
        ("brightness=much", r"transform 'brightness=much': 'much' is not a number"),
        ("brightness=2", r"transform 'brightness=2': .*brightness=2.0 must be in \[0, 1\)"),
    ],
)
def test_a_bad_transform_spelling_names_the_token_and_the_valid_ones(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_transform(spec)


runner = CliRunner()
TINY = ["-s", "size=16x20", "-s", "count=2", "-s", "steps=4", "-b", "2", "-t", "2", "-w", "0"]


@pytest.mark.parametrize("command", ["preview", "bench", "export"])
def test_the_cli_refuses_a_bad_transform_with_exit_2_naming_it(command: str, tmp_path: Path) -> None:
    args = [command, "camera", *TINY, "--transform", "crop=8,blur"]
    if command == "export":
        args.insert(2, str(tmp_path / "out"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "unknown transform 'blur'" in result.output and "flip[=P]" in result.output
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_a_crop_larger_than_the_frames_with_exit_2() -> None:
    result = runner.invoke(app, ["preview", "camera", *TINY, "--batches", "1", "--transform", "crop=32"])
    assert result.exit_code == 2, result.output
    assert "crop=32x32 is larger than field frame" in result.output


def test_export_with_a_transform_writes_the_transformed_layout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", "camera", str(out), *TINY, "--transform", "crop=8x12,flip,resize=4x6"])
    assert result.exit_code == 0, result.output
    reader = ShardReader(out)
    assert {f.name: f.shape for f in reader.fields}["frame"] == (3, 4, 6)
    batches = list(reader)
    assert batches and tuple(batches[0]["frame"].shape) == (2, 2, 3, 4, 6)
    assert reader.manifest["loader"]["transform"] == "crop=8x12,flip,resize=4x6"


def test_preview_shows_the_transformed_frames() -> None:
    result = runner.invoke(app, ["preview", "camera", *TINY, "--batches", "1", "--transform", "crop=8,flip"])
    assert result.exit_code == 0, result.output


def test_fields_of_a_field_argument_must_exist() -> None:
    with pytest.raises(ValueError, match=r"field='depth' is not a field of the source; its fields are frame, x"):
        RandomCrop(4, field="depth").fields(ImageSource([1]).fields())
    with pytest.raises(ValueError, match="declares no image field"):
        HorizontalFlip().fields([Field("x", (2,), "int64")])


@pytest.mark.slow
def test_the_example_runs_as_a_script_and_checks_its_claim() -> None:
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "transforms.py"
    done = subprocess.run([sys.executable, str(example), "--workers", "1", "--batches", "2", "--crop", "64"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "frame uint8[3, 64, 64]" in done.stdout and "every frame matched" in done.stdout


def test_every_image_field_of_a_step_gets_the_same_crop_and_flip_even_at_channel_like_sizes() -> None:
    fields = [Field("rgb", (3, 12, 16), "uint8", display="image"), Field("mask", (12, 16), "uint8", display="image")]
    # A crop 3 wide leaves a CHW frame looking like HWC; the flip must still mirror the width.
    t = Compose([RandomCrop((4, 3)), HorizontalFlip(1.0)])
    out_fields = t.fields(fields)
    assert [f.shape for f in out_fields] == [(3, 4, 3), (4, 3)]
    source = ImageSource([5])
    rgb = np.stack([source.frame(0, p) for p in range(5)])
    for seed in range(10):
        out = t({"rgb": rgb, "mask": rgb[:, 0].copy()}, Context(0, 0, 0, seed))
        assert np.array_equal(out["mask"], out["rgb"][:, 0]), "the two fields were cropped or flipped apart"
        found = [(y, x) for y in range(12 - 4 + 1) for x in range(16 - 3 + 1)
                 if np.array_equal(rgb[:, :, y : y + 4, x : x + 3][..., ::-1], out["rgb"])]  # fmt: skip
        assert len(found) == 1, "not a width-mirrored window of the frame"


class _InPlace:
    def __call__(self, block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]:
        block["x"] += 1
        return block


def test_a_transform_cannot_change_the_sources_window_in_place() -> None:
    with StreamLoader(WindowSource([4, 4]), 2, 2, transform=_InPlace()) as loader:
        with pytest.raises(TransformError, match="read-only"):
            next(iter(loader))


def test_each_rank_draws_from_the_same_stream_seeds() -> None:
    seen: dict[tuple[int, int], set[int]] = {}
    for rank in (0, 1):
        kw: dict[str, Any] = {"seed": 3, "rank": rank, "world_size": 2, "transform": DrawTransform()}
        with StreamLoader(WindowSource(LENGTHS), 2, 3, **kw) as lo:
            batches = run_epochs(lo, 1)
        for key, got in draws_of(batches, [0] * len(batches)).items():
            assert not seen.get(key), f"stream {key[1]} on both ranks"
            seen[key] = got
    assert sorted(seen) == [(0, i) for i in range(len(LENGTHS))]
    for (_, item), got in seen.items():
        assert got == {np.random.default_rng(stream_seed(3, 0, item)).integers(0, DRAW_HIGH)}
