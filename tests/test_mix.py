"""``streamcli.mix``: streams drawn from several sources by weight, with exact resume, segments and ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _resume import check_resume
from _sources import CountingSource, RaisingSource
from conftest import data_root, needs_shared, shared_data
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from streamcli import BaseSource, Field, Mix, SourceError, StreamLoader, load_source, mix
from streamcli.cli import app
from streamcli.cli._common import UsageFailure
from streamcli.cli._mix import parse_part, split_options
from streamcli.source import Step

TEXT = data_root("text")
BIG, SMALL = TEXT / "fortunes_literature.txt", TEXT / "tom_sawyer_excerpt.txt"  # 3350 and 886 steps of 16 bytes


def text_mix(
    books: Path = BIG, code: Path = SMALL, until: str = "first", weights: tuple[float, float] = (0.7, 0.3)
) -> Mix:
    return mix(
        {"books": load_source("text", str(books)), "code": load_source("text", str(code))},
        weights={"books": weights[0], "code": weights[1]},
        until=until,
    )


def epoch_of(loader: StreamLoader) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """One epoch: real steps per source, and every real step as (source, stream, position)."""
    per = np.zeros(len(loader.source.names), np.int64)  # type: ignore[attr-defined]
    seen: list[tuple[int, int, int]] = []
    for batch in loader:
        assert batch.source is not None
        src, valid = batch.source.numpy(), batch.valid.numpy()
        stream, pos = batch.stream.numpy(), batch.position.numpy()
        assert src.shape == valid.shape and src.dtype == np.int64
        assert ((src == -1) == ~valid).all(), "batch.source is -1 exactly on padding"
        per += np.bincount(src[valid], minlength=len(per))
        seen += list(zip(src[valid].tolist(), stream[valid].tolist(), pos[valid].tolist(), strict=True))
    return per, seen


def check_shares(per: np.ndarray, weights: Sequence[float]) -> None:
    shares = per / per.sum()
    for share, w in zip(shares, weights, strict=True):
        assert abs(share - w) <= 0.02, f"real-step shares {shares.round(4).tolist()} are not within 2 points of {w}"


@pytest.mark.parametrize("until", ["first", "restream"])
def test_a_07_03_mix_of_two_text_sources_gives_real_step_shares_within_two_points(until: str) -> None:
    m = text_mix(until=until)
    with StreamLoader(m, 4, 16, segment=32, seed=5) as loader:
        per, seen = epoch_of(loader)
        names = {s: loader.stream_name(s) for _, s, _ in seen}
    check_shares(per, (0.7, 0.3))
    for src, stream, _ in seen:  # batch.source names the source of the row's stream
        assert names[stream].startswith(("books:", "code:")[src])


@needs_shared("text")
@pytest.mark.slow
def test_a_07_03_mix_of_the_shared_books_gives_real_step_shares_within_two_points() -> None:
    root = shared_data("text")
    assert root is not None
    m = text_mix(root / "sherlock_holmes_pg1661.txt", root / "devils_dictionary.txt")
    with StreamLoader(m, 8, 32, segment=64, seed=1) as loader:
        per, _ = epoch_of(loader)
    check_shares(per, (0.7, 0.3))


def test_the_order_is_a_pure_function_of_seed_and_epoch_and_changes_with_them() -> None:
    def streams(seed: int, epochs: int) -> list[list[int]]:
        with StreamLoader(text_mix(), 4, 16, segment=32, seed=seed) as loader:
            return [[int(x) for x in loader.epochs.streams(e).starts] for e in range(epochs)]

    a, b = streams(0, 2), streams(0, 2)
    assert a == b
    assert a[0] != a[1], "each epoch reshuffles"
    assert streams(1, 1)[0] != a[0]


def test_until_first_ends_the_epoch_when_the_first_source_runs_out() -> None:
    m = text_mix()  # code (886 steps at weight 0.3) runs out long before books (3350 at 0.7)
    with StreamLoader(m, 4, 16, segment=32, seed=2) as loader:
        per, seen = epoch_of(loader)
    covered = Counter((src, pos) for src, _, pos in seen)
    assert {p for s, p in covered if s == 1} == set(range(886)), "the source that ran out is covered once"
    assert all(n == 1 for n in covered.values())
    assert 0 < per[0] < 3350, "the rest of books is not in this epoch"


def test_until_restream_restreams_the_smaller_source_until_every_source_is_covered_once() -> None:
    m = text_mix(until="restream")
    assert [src for src, _ in m.items()].count(1) > 1, "code's passes are listed in items()"
    with StreamLoader(m, 4, 16, segment=32, seed=2) as loader:
        per, seen = epoch_of(loader)
    covered = Counter((src, pos) for src, _, pos in seen)
    assert {p for s, p in covered if s == 0} == set(range(3350)), "books is covered once"
    assert {p for s, p in covered if s == 1} == set(range(886))
    assert max(n for (s, _), n in covered.items() if s == 1) == 2, "code is restreamed (about 1.6 passes)"
    check_shares(per, (0.7, 0.3))


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.integers(0, 40), min_size=1, max_size=25),
    b=st.lists(st.integers(0, 40), min_size=1, max_size=25),
    w=st.floats(0.05, 0.95),
    until=st.sampled_from(["first", "restream"]),
    shuffle=st.booleans(),
)
def test_every_prefix_of_the_order_stays_within_one_stream_of_the_weights(
    a: list[int], b: list[int], w: float, until: str, shuffle: bool
) -> None:
    assume(sum(a) and sum(b))  # a source with no steps cannot take its share
    m = mix({"a": CountingSource(a), "b": CountingSource(b)}, {"a": w, "b": 1 - w}, until=until)
    steps = np.asarray([m.length(it) or 0 for it in m.items()], np.int64)
    order = m.stream_order(np.arange(len(steps), dtype=np.int64), steps, 3, 1, shuffle)
    assert len(set(order.tolist())) == len(order), "no stream twice in an epoch"
    src = m.source_table()[order]
    longest = max(a + b)
    taken, total = np.zeros(2), 0.0
    for j, s_ in zip(order.tolist(), src.tolist(), strict=True):
        deficit = np.array([w, 1 - w]) * total - taken
        assert np.abs(deficit).max() <= longest + 1e-9, "each source's steps so far are within one stream of its share"
        taken[s_] += steps[j]
        total += steps[j]
    firsts = [set(np.nonzero((m.source_table() == i) & (m._pass_of == 0))[0].tolist()) for i in range(2)]
    if until == "first":
        assert any(f <= set(order.tolist()) for f in firsts), "the source that ran out is wholly in the epoch"
    else:
        assert all(f <= set(order.tolist()) for f in firsts), "every source is covered once"
    if not shuffle:
        for i in range(2):  # without shuffle each source's streams come in item order
            mine = order[src == i]
            assert (np.diff(mine) > 0).all()


def test_a_source_of_no_steps_is_not_restreamed() -> None:
    m = mix({"empty": CountingSource([0, 0]), "b": CountingSource([5, 3])}, until="restream")
    assert [src for src, _ in m.items()] == [0, 0, 1, 1]


def test_equal_weights_by_default() -> None:
    m = mix({"a": load_source("text", str(BIG)), "b": load_source("text", str(BIG))})
    assert m.weights == (0.5, 0.5) and m.names == ("a", "b")


@pytest.mark.parametrize(
    ("workers_before", "workers_after"),
    [(0, 0), pytest.param(2, 2, marks=pytest.mark.slow), pytest.param(0, 2, marks=pytest.mark.slow)],
)
def test_a_mix_resumes_exactly_mid_epoch(workers_before: int, workers_after: int) -> None:
    check_resume(
        lambda: text_mix(until="restream"), 3, 16, segment=48, seed=4, cuts=[7, 40],
        workers_before=workers_before, workers_after=workers_after,
    )  # fmt: skip


def test_the_sources_of_a_resumed_run_match_the_uninterrupted_one() -> None:
    def sources(loader: StreamLoader, n: int | None = None) -> list[np.ndarray]:
        out = []
        for batch in loader:
            assert batch.source is not None
            out.append(batch.source.numpy().copy())
            if n is not None and len(out) == n:
                break
        return out

    with StreamLoader(text_mix(), 3, 16, segment=48, seed=4) as ref:
        want = sources(ref)
    with StreamLoader(text_mix(), 3, 16, segment=48, seed=4) as a:
        head = sources(a, 10)
        state = json.loads(json.dumps(a.state_dict()))
    with StreamLoader(text_mix(), 3, 16, segment=48, seed=4) as b:
        b.load_state_dict(state)
        tail = sources(b)
    assert all(np.array_equal(x, y) for x, y in zip(want, head + tail, strict=True))


def test_a_state_of_another_weighting_is_refused() -> None:
    with StreamLoader(text_mix(), 3, 16, segment=48) as a:
        state = a.state_dict()
    with StreamLoader(text_mix(weights=(0.5, 0.5)), 3, 16, segment=48) as b, pytest.raises(ValueError, match="mix"):
        b.load_state_dict(state)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_the_single_rank_epoch_of_a_mix(world_size: int) -> None:
    with StreamLoader(text_mix(), 2, 16, segment=40, seed=3) as one:
        _, whole = epoch_of(one)
    union: list[tuple[int, int, int]] = []
    for rank in range(world_size):
        with StreamLoader(text_mix(), 2, 16, segment=40, seed=3, rank=rank, world_size=world_size) as loader:
            _, mine = epoch_of(loader)
        union += mine
    assert sorted(union) == sorted(whole), "the ranks' union is the single-rank epoch, each step once"


def test_a_state_saved_on_one_rank_loads_on_another() -> None:
    kw: dict[str, Any] = dict(segment=40, seed=3, world_size=2)
    with StreamLoader(text_mix(), 2, 16, rank=1, **kw) as r1:
        it = iter(r1)
        for _ in range(5):
            next(it)
        want = [b.stream.numpy().copy() for b in it]
    with StreamLoader(text_mix(), 2, 16, rank=0, **kw) as r0:
        it = iter(r0)
        for _ in range(5):
            next(it)
        state = r0.state_dict()
    with StreamLoader(text_mix(), 2, 16, rank=1, **kw) as again:
        again.load_state_dict(state)
        got = [b.stream.numpy().copy() for b in again]
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_segments_of_an_item_are_streams_of_its_source() -> None:
    with StreamLoader(text_mix(), 4, 8, segment=20, seed=0) as loader:
        per, seen = epoch_of(loader)
        by_stream = {s: loader.stream_name(s).split(":")[0] for _, s, _ in seen}
    assert {("books", "code")[src] == by_stream[s] for src, s, _ in seen} == {True}
    check_shares(per, (0.7, 0.3))


@pytest.mark.parametrize("layout", ["TB", "BT"])
def test_len_counts_the_mixed_epoch_and_source_follows_the_layout(layout: str) -> None:
    m = mix({"a": CountingSource([5, 9, 2, 7, 4, 8]), "b": CountingSource([3, 6, 10])}, {"a": 0.5, "b": 0.5})
    with StreamLoader(m, 2, 3, seed=1, layout=layout) as loader:
        for epoch in range(2):
            expected = len(loader)
            batches = list(loader)
            assert len(batches) == expected, f"epoch {epoch}"
            for batch in batches:
                assert batch.source is not None and batch.source.shape == batch.stream.shape
                assert batch.clone().source is not None and batch.to("cpu").source is not None


def test_a_failing_mixed_source_names_the_mix_and_the_item() -> None:
    m = mix({"good": CountingSource([4, 4]), "bad": RaisingSource([4, 4], bad=1, at=2)}, until="restream")
    with StreamLoader(m, 2, 2) as loader, pytest.raises(SourceError, match=r"item 'bad:1'"):
        list(loader)


def test_without_a_mix_batches_have_no_source() -> None:
    with StreamLoader(load_source("text", str(SMALL)), 2, 8) as loader:
        assert next(iter(loader)).source is None


class BlockCounting(CountingSource):
    """``CountingSource`` read in blocks of up to five steps."""

    block_steps = True

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        p = np.arange(start, self.lengths[item])
        for a in range(0, len(p), 5):
            q = p[a : a + 5]
            yield {"x": np.stack([np.full(len(q), item), q], axis=1)}


def test_a_step_source_mixed_with_a_block_source_delivers_each_items_own_steps() -> None:
    m = mix({"steps": CountingSource([7, 12, 3]), "blocks": BlockCounting([9, 4, 11, 6])}, {"steps": 1, "blocks": 1})
    assert m.block_steps
    seen = 0
    with StreamLoader(m, 2, 4, seed=1) as loader:
        for batch in loader:
            x, v = batch["x"].numpy(), batch.valid.numpy()
            items = [m.items()[s] for s in batch.stream.numpy()[v].tolist()]
            assert x[v][:, 0].tolist() == [sub for _, sub in items], "each step comes from its item"
            assert (x[v][:, 1] == batch.position.numpy()[v]).all()
            seen += int(v.sum())
    assert seen > 0


def test_with_unknown_lengths_shares_are_counted_in_streams() -> None:
    m = mix({"a": CountingSource([5] * 40, report_length=False), "b": CountingSource([5] * 40, report_length=False)},
            {"a": 0.75, "b": 0.25})  # fmt: skip
    with StreamLoader(m, 4, 4, seed=0) as loader:
        order = loader.epochs.streams(0).items
    picked = np.bincount(m.source_table()[order], minlength=2)
    assert picked[0] == 40, "a runs out first, which ends the epoch"
    assert abs(picked[1] - 0.25 * picked.sum()) <= 1, f"b took a quarter of the streams, within one: {picked}"


@pytest.mark.slow
def test_a_mix_of_iterator_sources_of_unknown_length_resumes_exactly_with_workers() -> None:
    def make() -> Mix:
        return mix(
            {"a": CountingSource([9, 14, 3, 20, 7, 11], report_length=False), "b": CountingSource([6, 13, 8, 5])},
            {"a": 0.6, "b": 0.4},
            until="restream",
        )

    check_resume(make, 3, 4, seed=2, cuts=[3, 9], workers_before=2, workers_after=1)


# ------------------------------------------------------------------------------------------ fields, weights


class Steps(BaseSource):
    def __init__(self, fields: Sequence[Field]) -> None:
        self._fields = tuple(fields)

    def items(self) -> list[int]:
        return [0]

    def fields(self) -> Sequence[Field]:
        return self._fields

    def open(self, item: Any, start: int = 0) -> Iterator[Step]:
        return iter(())


X = Field("x", (3,), "float32")


@pytest.mark.parametrize(
    ("other", "match"),
    [
        ((Field("x", (4,), "float32"),), r"field 'x' has shape \[3\] in source 'a' but \[4\] in source 'b'"),
        ((Field("x", (3,), "int16"),), r"field 'x' is float32 in source 'a' but int16 in source 'b'"),
        ((Field("y", (3,), "float32"),), r"field 'x' of source 'a' is missing from source 'b'"),
        ((X, Field("y", (), "int8")), r"field 'y' of source 'b' is missing from source 'a'"),
    ],
)
def test_fields_that_differ_are_named_with_how(other: tuple[Field, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mix({"a": Steps([X]), "b": Steps(other)})


def test_fields_in_another_order_or_display_still_mix() -> None:
    y = Field("y", (), "int8")
    m = mix({"a": Steps([X, y]), "b": Steps([Field("y", (), "int8", display="other"), X])})
    assert tuple(m.fields()) == (X, y)


@pytest.mark.parametrize(
    ("weights", "until", "match"),
    [
        ({"a": 1, "b": 0}, "first", "the weight of 'b' must be a positive number, got 0"),
        ({"a": 1, "b": float("nan")}, "first", "the weight of 'b' must be a positive number"),
        ({"a": 1}, "first", "source 'b' has no weight"),
        ({"a": 1, "b": 1, "c": 1}, "first", "weights name 'c', which is not a source"),
        ({"a": 1, "b": 1}, "never", "until='never' must be 'first' or 'restream'"),
    ],
)
def test_bad_weights_and_options_are_named(weights: dict[str, float], until: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mix({"a": Steps([X]), "b": Steps([X])}, weights, until=until)


# ---------------------------------------------------------------------------------------------------- CLI
PLUGINS = ["text", "video", "camera"]


def test_cli_specs_parse_name_weight_plugin_and_path() -> None:
    assert parse_part("books=0.7:text:books/", PLUGINS).args == ("text", "books/")
    assert parse_part("cam=2:camera", PLUGINS).args == ("camera",)
    assert parse_part("books=1:s3://bucket/books/", PLUGINS).args == ("s3://bucket/books/",)
    assert parse_part(f"books=1:{TEXT}", PLUGINS).args == (str(TEXT),)
    part = parse_part("code=0.3:text:src/a:b.txt", PLUGINS)
    assert (part.name, part.weight, part.args) == ("code", 0.3, ("text", "src/a:b.txt"))


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("books=0:text:x", "the weight '0' must be a positive number"),
        ("books=-1:text:x", "the weight '-1' must be a positive number"),
        ("books=heavy:text:x", "the weight 'heavy' must be a positive number"),
        ("books=0.7", "names no source"),
        ("books", "must be NAME=WEIGHT:SOURCE"),
        ("books=0.7:txt:books/", "no plugin named 'txt'.*did you mean 'text'"),
    ],
)
def test_cli_bad_specs_are_usage_errors(spec: str, match: str) -> None:
    with pytest.raises(UsageFailure, match=match):
        parse_part(spec, PLUGINS)


def test_cli_options_go_to_every_source_to_one_or_to_the_mix() -> None:
    until, common, per = split_options(["width=8", "code.glob=*.py", "until=restream"], ["books", "code"])
    assert (until, common, per) == ("restream", ["width=8"], {"books": [], "code": ["glob=*.py"]})
    with pytest.raises(UsageFailure, match="no mixed source named 'docs'"):
        split_options(["docs.width=8"], ["books", "code"])


def test_cli_exports_a_mix_and_refuses_bad_specs(tmp_path: Path) -> None:
    runner = CliRunner()
    books, code = f"books=0.7:text:{BIG}", f"code=0.3:text:{SMALL}"
    out = tmp_path / "out"
    args = ["mix", books, code, str(out), "--segment", "32", "-b", "4", "-t", "16", "-w", "0"]  # in this process
    r = runner.invoke(app, ["export", *args])
    assert r.exit_code == 0, r.output
    streams = json.loads((out / "index.json").read_text())["streams"]
    assert streams[0].startswith("books:") and streams[-1].startswith("code:")
    for bad, match in [
        (["mix", "books=0:text:x", code], "the weight '0' must be a positive number"),
        (["mix", "books=1:nope:x", code], "no plugin named 'nope'"),
        (["mix", books, code, "-s", "code.width=8"], "field 'text' has shape"),
        (["mix", books, "books=1:text:x"], "names 'books' twice"),
        (["mix"], "mix needs one or more"),
        (["mix", books, code, "--engine", "ray"], "--engine ray cannot export a mix yet"),
    ]:
        r = runner.invoke(app, ["export", *bad, str(tmp_path / "bad")])
        assert r.exit_code == 2, (bad, r.output)
        assert match.split(".*")[0] in " ".join(r.output.split()), (bad, r.output)


@pytest.mark.parametrize("command", ["preview", "bench"])
def test_cli_preview_and_bench_take_a_mix(command: str) -> None:
    extra = ["--batches", "2"] if command == "preview" else ["--batches", "2", "--repeats", "1", "--warmup", "0"]
    extra += ["-w", "0"]  # in this process: the mix is what is under test, not the workers
    r = CliRunner().invoke(app, [command, "mix", f"books=0.7:text:{BIG}", f"code=0.3:text:{SMALL}", *extra])
    assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_the_example_runs_as_a_script_and_resumes_identically() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "mix.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300, check=True).stdout
    assert "70.4%" in out and "29.6%" in out, out
    assert "identical" in out, out
