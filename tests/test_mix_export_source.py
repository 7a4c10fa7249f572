"""An export of a mix keeps ``batch.source``: the shards hold it, the manifest names the sources, and
``ShardReader`` and ``replay`` give both back."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from conftest import data_root
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source, mix
from streamcli.cli import app
from streamcli.shards import ShardReader, make_header, verify
from streamcli.shards.exporting import export_loader

TEXT = data_root("text")
BIG, SMALL = TEXT / "fortunes_literature.txt", TEXT / "tom_sawyer_excerpt.txt"
runner = CliRunner()


def _mixed() -> object:
    books, code = load_source("text", str(BIG)), load_source("text", str(SMALL))
    return mix({"books": books, "code": code}, {"books": 0.7, "code": 0.3})


def test_shard_reader_gives_back_the_source_of_every_step_of_a_mix_export(tmp_path: Path) -> None:
    with StreamLoader(_mixed(), 3, 16, seed=2, segment=64) as loader:  # type: ignore[arg-type]
        want = [b.clone() for b in loader]
    with StreamLoader(_mixed(), 3, 16, seed=2, segment=64) as loader:  # type: ignore[arg-type]
        header = make_header(
            fields=loader.fields, batch_size=3, time_steps=16, layout="TB", source={}, loader={},
            shard_bytes=20_000, compress=False,
        )  # fmt: skip
        m = export_loader(loader, tmp_path / "run", header)
    assert m["sources"] == ["books", "code"]
    assert verify(tmp_path / "run") == []
    reader = ShardReader(tmp_path / "run")
    assert reader.sources == ["books", "code"]
    got = list(reader)
    assert len(got) == len(want) > 1
    for b, w in zip(got, want, strict=True):
        assert w.source is not None and b.source is not None
        assert torch.equal(b.source, w.source)
        assert torch.equal(b.stream, w.stream) and torch.equal(b["text"], w["text"])
    both = torch.cat([b.source[b.valid] for b in got if b.source is not None])
    assert set(both.tolist()) == {0, 1}


def test_a_plain_export_has_no_sources_and_no_source_member(tmp_path: Path) -> None:
    with StreamLoader(load_source("text", str(SMALL)), 2, 16) as loader:
        header = make_header(
            fields=loader.fields, batch_size=2, time_steps=16, layout="TB", source={}, loader={},
            shard_bytes=20_000, compress=False,
        )  # fmt: skip
        m = export_loader(loader, tmp_path / "run", header, batches=3)
    assert "sources" not in m and verify(tmp_path / "run") == []
    assert all(b.source is None for b in ShardReader(tmp_path / "run"))


def test_the_cli_exports_a_mix_whose_replay_counts_each_source(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["mix", f"books=0.7:text:{BIG}", f"code=0.3:text:{SMALL}", str(out), "--segment", "32", "-b", "4"]
    r = runner.invoke(app, ["export", *args, "-t", "16", "-w", "0", "--batches", "40"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "index.json").read_text())["sources"] == ["books", "code"]
    r = runner.invoke(app, ["replay", str(out), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    counts = {x["name"]: x["valid_steps"] for x in s["sources"]}
    assert set(counts) == {"books", "code"} and all(counts.values())
    assert sum(counts.values()) == s["valid_steps"]
    r = runner.invoke(app, ["replay", str(out)])
    assert r.exit_code == 0 and f"sources  books {counts['books']}, code {counts['code']} steps" in r.output, r.output
