"""``streamcli.export``: a loader's batches to shards in one call, read back by ``ShardReader``, resumable,
refusing what it may not replace, and passing ``verify``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from _sources import CountingSource
from typer.testing import CliRunner

import streamcli
from streamcli import ConfigError, Field, ShardError, ShardReader, StreamLoader
from streamcli.cli import app
from streamcli.exports import ExportSummary, parse_size
from streamcli.shards import ShardWriter, batch_nbytes, verify

LENGTHS = [60, 45, 80, 33, 71, 52, 64]
B, T = 3, 4
FIVE = 5 * batch_nbytes((Field("x", (2,), "int64"),), B, T)  # shard_size: five batches a shard


def loader(**kw: Any) -> StreamLoader:
    return StreamLoader(CountingSource(LENGTHS), B, T, seed=1, **kw)


def epoch(**kw: Any) -> list[dict[str, torch.Tensor]]:
    with loader(**kw) as ld:
        return [{"x": b["x"].clone(), **{k: v.clone() for k, v in b.flags().items()}} for b in ld]


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def same(got: list[Any], want: list[dict[str, torch.Tensor]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g["x"], w["x"])
        for k, v in g.flags().items():
            assert torch.equal(v, w[k]), k


def test_export_is_public_and_its_summary_matches_the_shards(tmp_path: Path) -> None:
    assert streamcli.export is streamcli.exports.export and "export" in streamcli.__all__
    assert "ExportSummary" in streamcli.__all__
    want = epoch()
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "run", shard_size=FIVE)
    assert isinstance(s, ExportSummary)
    assert verify(tmp_path / "run") == []
    same(list(ShardReader(tmp_path / "run")), want)
    assert s.out_dir == str(tmp_path / "run") and s.batches == s.written_batches == len(want)
    shards = sorted((tmp_path / "run").glob("shard-*.npz"))
    assert s.shards == s.written_shards == len(shards) > 1
    assert s.bytes == s.written_bytes == sum(p.stat().st_size for p in shards)
    assert s.steps == len(want) * B * T and s.valid_steps == sum(int(b["valid"].sum()) for b in want) == sum(LENGTHS)
    assert s.useful_share == s.valid_steps / s.steps < 1
    assert s.compress == "none" and s.level is None and not s.resumed and not s.already_complete
    assert s.manifest["batches"] == len(want)
    j = json.loads(json.dumps(s.to_json()))  # plain JSON values, keyed as export --json prints them
    assert j["batches"] == len(want) and j["written"] == {"batches": s.batches, "shards": s.shards, "bytes": s.bytes}
    assert j["compression"] == "none" and j["useful_share"] == s.useful_share
    with pytest.raises(AttributeError):
        s.batches = 0  # type: ignore[misc]  # frozen


@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_the_output_passes_streamcli_verify_json(tmp_path: Path, compress: str) -> None:
    if compress == "zstd":
        pytest.importorskip("zstandard")
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "run", compress=compress, shard_size=FIVE)
    out = CliRunner().invoke(app, ["verify", str(tmp_path / "run"), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["ok"] is True and got["problems"] == []
    assert (got["batches"], got["shards"], got["batch_size"], got["time_steps"]) == (s.batches, s.shards, B, T)
    (tmp_path / "run" / "shard-00000.npz").write_bytes(b"broken")  # and a broken one does not pass
    out = CliRunner().invoke(app, ["verify", str(tmp_path / "run"), "--json"])
    assert out.exit_code != 0 and json.loads(out.stdout)["ok"] is False


def test_the_cli_reports_the_same_summary(tmp_path: Path) -> None:
    cam = ["camera", "-s", "count=2", "-s", "steps=4", "-s", "size=8x8", "-b", "2", "-t", "2", "-w", "0"]
    out = CliRunner().invoke(app, ["export", *cam, str(tmp_path / "cli"), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "py")
    assert got.keys() == s.to_json().keys()
    assert got["batches"] == got["written"]["batches"] == 2 and got["valid_steps"] == got["steps"] == 8
    assert got["useful_share"] == 1.0 and got["compression"] == "none" and got["out_dir"] == str(tmp_path / "cli")


def test_batches_runs_as_many_epochs_as_it_needs_and_epochs_caps_it(tmp_path: Path) -> None:
    with loader() as ld:
        one, two = ld.batches_in_epoch(0), ld.batches_in_epoch(0) + ld.batches_in_epoch(1)
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "a", batches=one + 5)
    assert s.batches == one + 5 and sorted({b.epoch for b in ShardReader(tmp_path / "a")}) == [0, 1]
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "b", epochs=2)
    assert s.batches == two
    with loader() as ld:  # the cap wins
        s = streamcli.export(ld, tmp_path / "c", batches=10 * two, epochs=2)
    assert s.batches == two
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "d", batches=4, epochs=2)
    assert s.batches == 4


def test_an_interrupted_export_resumes_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with loader() as ld:
        full = streamcli.export(ld, tmp_path / "full", epochs=2, shard_size=FIVE)
    write = ShardWriter.write
    calls = []

    class Killed(Exception):
        pass

    def dying(self: ShardWriter, *a: Any, **kw: Any) -> None:
        calls.append(1)
        if len(calls) > 23:
            raise Killed
        write(self, *a, **kw)

    monkeypatch.setattr(ShardWriter, "write", dying)
    with loader() as ld, pytest.raises(Killed):
        streamcli.export(ld, tmp_path / "part", epochs=2, shard_size=FIVE)
    monkeypatch.setattr(ShardWriter, "write", write)
    with pytest.raises(ShardError, match=r"not empty; pass overwrite=True .* or resume=True"):
        with loader() as ld:
            streamcli.export(ld, tmp_path / "part", epochs=2, shard_size=FIVE)
    with loader() as ld:
        s = streamcli.export(ld, tmp_path / "part", epochs=2, shard_size=FIVE, resume=True)
    assert files(tmp_path / "part") == files(tmp_path / "full")
    assert s.resumed and not s.already_complete and s.batches == full.batches and s.shards == full.shards
    assert 0 < s.written_batches < full.batches and 0 < s.written_shards < full.shards
    assert s.written_bytes < s.bytes == full.bytes
    with loader() as ld:  # once more: already complete, nothing written
        again = streamcli.export(ld, tmp_path / "part", epochs=2, shard_size=FIVE, resume=True)
    assert again.already_complete and again.written_batches == again.written_bytes == 0
    assert files(tmp_path / "part") == files(tmp_path / "full")


def test_overwrite_replaces_an_export_but_never_a_users_file(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with loader() as ld:
        streamcli.export(ld, out, batches=3)
    with loader() as ld, pytest.raises(ShardError, match=r"is not empty; pass overwrite=True"):
        streamcli.export(ld, out, batches=5)
    with loader() as ld:
        s = streamcli.export(ld, out, batches=5, overwrite=True)
    assert s.batches == 5 and verify(out) == []
    (out / "notes.md").write_text("mine")
    with loader() as ld, pytest.raises(ShardError, match=r"holds 'notes.md', which no export wrote"):
        streamcli.export(ld, out, batches=5, overwrite=True)
    assert (out / "notes.md").read_text() == "mine" and verify(out) != []
    with loader() as ld, pytest.raises(ConfigError, match="exclude each other"):
        streamcli.export(ld, tmp_path / "x", overwrite=True, resume=True)
    (tmp_path / "f").write_text("")
    with loader() as ld, pytest.raises(ConfigError, match=r"exists and is not a folder"):
        streamcli.export(ld, tmp_path / "f")
    with loader() as ld, pytest.raises(ConfigError, match=r"'.*f' is a file, not a folder"):
        streamcli.export(ld, tmp_path / "f" / "run")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("text", "value"),
    [("64MB", 64 * 10**6), ("500kB", 500_000), ("1GiB", 2**30), ("2 MiB", 2 * 2**20), ("1.5g", 1_500_000_000),
     ("4096", 4096), (65536, 65536), ("64mb", 64 * 10**6)],
)  # fmt: skip
def test_shard_size_parses_decimal_and_binary_units(text: str | int, value: int) -> None:
    from streamcli.cli._export_plan import parse_size as cli_parse_size

    assert parse_size(text) == value
    assert isinstance(text, int) or cli_parse_size(text) == value  # --shard-size: the same


@pytest.mark.parametrize("bad", ["64XB", "", "MB", "-1MB", "0", 0, -5, True, 1.5, "1e3", "64 MB MB"])
def test_a_bad_shard_size_is_a_config_error_naming_it(tmp_path: Path, bad: Any) -> None:
    from streamcli.cli._common import UsageFailure
    from streamcli.cli._export_plan import parse_size as cli_parse_size

    if isinstance(bad, str):  # the CLI's --shard-size reads sizes the same way, and refuses in its own words
        with pytest.raises(UsageFailure, match=r"--shard-size .* must be a size like 64MB"):
            cli_parse_size(bad)
    with pytest.raises(ConfigError, match=r"shard_size=.* must be a size like 64MB, 500kB or 1GiB"):
        parse_size(bad)
    with loader() as ld, pytest.raises(ConfigError, match=r"shard_size="):
        streamcli.export(ld, tmp_path / "run", shard_size=bad)
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"batches": 0}, "batches=0 must be a whole number"), ({"epochs": 1.5}, "epochs=1.5 must be"),
     ({"compress": "gzip"}, "compress='gzip' must be one of 'none', 'deflate', 'zstd'"),
     ({"level": 9}, "level=9 is for compress='zstd' only"),
     ({"compress": "zstd", "level": 40}, "level=40 must be an integer from 1 to 22")],
)  # fmt: skip
def test_bad_arguments_are_config_errors(tmp_path: Path, kw: dict[str, Any], match: str) -> None:
    if kw.get("compress") == "zstd":
        pytest.importorskip("zstandard")
    with loader() as ld, pytest.raises(ConfigError, match=match):
        streamcli.export(ld, tmp_path / "run", **kw)
    with pytest.raises(ConfigError, match="must be a StreamLoader"):
        streamcli.export(object(), tmp_path / "run")


def test_zstd_exports_read_back_the_same_batches(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    want = epoch()
    with loader() as ld:
        z = streamcli.export(ld, tmp_path / "z", compress="zstd", level=5)
    with loader() as ld:
        plain = streamcli.export(ld, tmp_path / "p")
    assert z.compress == "zstd" and z.level == 5 and z.manifest["compression_level"] == 5
    assert z.bytes < plain.bytes and verify(tmp_path / "z") == []
    same(list(ShardReader(tmp_path / "z")), want)


@pytest.mark.slow
def test_importing_streamcli_and_its_export_does_not_import_torch() -> None:
    code = "import sys, streamcli; streamcli.export; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_an_export_to_s3_matches_a_local_one_and_resumes_there(tmp_path: Path, bucket: str) -> None:
    pytest.importorskip("s3fs")
    from streamcli.storage.remote import Remote

    url = f"{bucket}/run"
    with loader() as ld:
        local = streamcli.export(ld, tmp_path / "run", shard_size=FIVE)
    with loader() as ld:
        s = streamcli.export(ld, url, shard_size=FIVE)
    assert s.out_dir == url and s.bytes == local.bytes and s.shards == local.shards
    r = Remote(url)
    assert {n: r.read(n) for n in r.listing()} == files(tmp_path / "run")
    assert verify(url) == []
    same(list(ShardReader(url)), epoch())
    with loader() as ld, pytest.raises(ShardError, match=r"is not empty; pass overwrite=True"):
        streamcli.export(ld, url, shard_size=FIVE)
    with loader() as ld:
        again = streamcli.export(ld, url, shard_size=FIVE, resume=True)
    assert again.already_complete and again.written_batches == 0
