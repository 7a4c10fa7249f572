"""``streamcli inspect``'s app driven headless by Textual's pilot on real clips: every key, and ``g`` K lands on
the batch a loader hands out K-th (in-process, with 2 workers, on an export, after a resume on another world
size)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import needs_shared, shared_data

from streamcli import StreamLoader, load_source
from streamcli.batch import Batch
from streamcli.cli.inspect import InspectApp
from streamcli.cli.inspect.follow import FollowPane
from streamcli.cli.inspect.help import HelpScreen
from streamcli.inspection import ExportBatches, LoaderBatches

pytestmark = [pytest.mark.slow, needs_shared("video")]
CLIPS = ("realshort.mp4", "homer.avi", "Effet_force_magnetique.ogv", "bikes.mp4", "dummy_video.avi")
B, T = 3, 4
DOCS = Path(__file__).resolve().parents[1] / "docs" / "images"
WRITE_DOCS = os.environ.get("STREAMCLI_DOCS_SCREENSHOT") == "1"  # =1: the screenshot goes to docs/images/inspect.svg


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory, video_scans: str) -> Path:
    """Five small real clips (about 400 frames) in a folder of their own."""
    shared = shared_data("video")
    assert shared is not None
    folder = tmp_path_factory.mktemp("clips")
    for name in CLIPS:
        (folder / name).symlink_to(shared / name)
    return folder


def source(clips: Path, video_scans: str) -> Any:
    return load_source("video", str(clips), size=(24, 32), scan=True, cache_dir=video_scans)


def plain(src: Any, n: int, state: dict[str, Any] | None = None, **kw: Any) -> list[Batch]:
    """The first ``n`` batches a plain loader hands out (after loading ``state``), epoch after epoch."""
    out: list[Batch] = []
    with StreamLoader(src, kw.pop("batch_size", B), T, **kw) as loader:
        if state is not None:
            loader.load_state_dict(state)
        while len(out) < n:
            for batch in loader:
                out.append(batch.clone())
                if len(out) == n:
                    break
    return out


def same(a: Batch | None, b: Batch) -> bool:
    assert a is not None
    flags = ("is_first", "valid", "stream", "position", "reset")
    return all(np.array_equal(getattr(a, f).numpy(), getattr(b, f).numpy()) for f in flags) and all(
        np.array_equal(a[k].numpy(), b[k].numpy()) for k in a
    )


def drive(app: InspectApp, script: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(app, pilot)
            await script(pilot)

    asyncio.run(main())


async def settle(app: InspectApp, pilot: Any) -> None:
    """Until the batch (or strip) being read is on the screen."""
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def goto(app: InspectApp, pilot: Any, k: int) -> None:
    await pilot.press("g", *str(k), "enter")
    await settle(app, pilot)


def test_every_key_of_the_app_on_real_clips_and_g_k_lands_on_the_kth_batch(
    clips: Path, video_scans: str, tmp_path: Path
) -> None:
    want = plain(source(clips, video_scans), 41)
    seen: dict[str, Any] = {}
    with StreamLoader(source(clips, video_scans), B, T) as loader:
        batches = LoaderBatches(loader)
        app = InspectApp(batches, displays={f.name: f.display for f in loader.fields})

        async def script(pilot: Any) -> None:
            assert app.status_line.startswith("batch 0 ") and same(app.batch, want[0])
            for key, k in (("n", 1), ("right", 2), ("p", 1), ("left", 0)):
                await pilot.press(key)
                await settle(app, pilot)
                assert app.k == k and app.status_line.startswith(f"batch {k} ") and same(app.batch, want[k]), key
            await goto(app, pilot, 40)
            assert app.k == 40 and app.status_line.startswith("batch 40 ") and same(app.batch, want[40])
            assert batches.opened_at[-1] == 40  # reached by a seek, not by reading batches 1..39
            await pilot.press("down", "down")
            assert app.selected == 2
            await pilot.press("up")
            assert app.selected == 1
            await pilot.press("f")
            await settle(app, pilot)
            seen["follow"] = str(app.query_one(FollowPane).render())
            seen["stream"] = app.following
            await pilot.press("question_mark")
            await pilot.pause()
            seen["help"] = isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
            seen["closed"] = not isinstance(app.screen, HelpScreen)
            seen["svg"] = app.save_screenshot(filename="inspect.svg", path=str(DOCS if WRITE_DOCS else tmp_path))
            await pilot.press("q")
            await pilot.pause()
            seen["quit"] = app.return_code is not None or not app.is_running

        drive(app, script)
        batches.close()
    stream = int(want[40].stream[:, 1][want[40].valid[:, 1]][0])
    assert seen["stream"] == stream and f"following stream {stream}" in seen["follow"]
    rows_40 = [b for b in range(B) if (want[40].stream[:, b] == stream).any()]
    assert f"▶ row {rows_40[0]:>3}  batches " in seen["follow"]  # the run of batches that holds batch 40
    assert seen["help"] and seen["closed"] and seen["quit"]
    svg = Path(seen["svg"]).read_text()
    assert "batch 40" in svg.replace("&#160;", " ") and Path(seen["svg"]).stat().st_size < 200_000


def test_g_k_with_two_workers_lands_on_the_kth_batch_of_a_plain_loader(clips: Path, video_scans: str) -> None:
    want = plain(source(clips, video_scans), 41)
    with StreamLoader(source(clips, video_scans), B, T, num_workers=2) as loader:
        batches = LoaderBatches(loader)
        app = InspectApp(batches)
        got: dict[int, Batch | None] = {}

        async def script(pilot: Any) -> None:
            for k in (40, 5, 6):
                await goto(app, pilot, k)
                got[k] = app.batch

        drive(app, script)
        batches.close()
    assert all(same(got[k], want[k]) for k in (40, 5, 6))


def test_g_k_on_an_export_lands_on_its_kth_batch(clips: Path, video_scans: str, tmp_path: Path) -> None:
    from streamcli.shards import make_header
    from streamcli.shards.exporting import export_loader

    with StreamLoader(source(clips, video_scans), B, T) as loader:
        header = make_header(
            fields=loader.fields,
            batch_size=B,
            time_steps=T,
            layout="TB",
            source={"plugin": "video"},
            loader={"seed": 0},
            shard_bytes=1,
            compress=False,
        )
        header["batches_per_shard"] = 16
        export_loader(loader, tmp_path / "out", header, epochs=1)
    want = plain(source(clips, video_scans), 41)
    batches = ExportBatches(tmp_path / "out")
    app = InspectApp(batches)
    got: dict[int, Batch | None] = {}

    async def script(pilot: Any) -> None:
        for k in (40, 3):
            await goto(app, pilot, k)
            got[k] = app.batch

    drive(app, script)
    assert same(got[40], want[40]) and same(got[3], want[3])


def test_after_a_resume_saved_on_another_world_size_g_k_is_the_kth_batch_after_it(
    clips: Path, video_scans: str
) -> None:
    # Saved by rank 0 of 2 ranks of 2 rows each (a global batch of 4), inspected on one rank of 3 rows: the rest of
    # the epoch is re-planned (streams in flight go on in new rows), as a plain loader re-plans it.
    with StreamLoader(source(clips, video_scans), 2, T, rank=0, world_size=2) as ranked:
        it = iter(ranked)
        for _ in range(12):
            next(it)
        state = ranked.state_dict()
    want = plain(source(clips, video_scans), 31, state=state)
    with StreamLoader(source(clips, video_scans), B, T) as loader:
        batches = LoaderBatches(loader, start=state)
        app = InspectApp(batches)
        got: dict[int, Batch | None] = {}

        async def script(pilot: Any) -> None:
            for k in (30, 2, 0):
                await goto(app, pilot, k)
                got[k] = app.batch

        drive(app, script)
        batches.close()
    assert all(same(got[k], want[k]) for k in (30, 2, 0))
    assert batches.opened_at == [0, 30, 2]  # batch 0 again came from the cache
