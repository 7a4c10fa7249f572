"""``streamcli replay``: a full check and a summary of an export, read back with ShardReader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streamcli.cli import app

runner = CliRunner()
CAM = ["camera", "-s", "size=16x16", "-s", "count=3", "-s", "steps=10"]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("replay") / "out"
    result = runner.invoke(app, ["export", *CAM, str(out), "-b", "2", "-t", "4", "-w", "0", "--shard-size", "10kB"])
    assert result.exit_code == 0, result.output
    return out


def test_replay_summarises_an_export_as_json(export: Path) -> None:
    result = runner.invoke(app, ["replay", str(export), "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.output)
    manifest = json.loads((export / "index.json").read_text())
    assert s["ok"] is True and s["problems"] == []
    assert s["batches"] == manifest["batches"] and s["shards"] == len(manifest["shards"]) > 1
    assert s["streams"] == s["streams_replayed"] == 3
    assert s["valid_steps"] == 3 * 10 and s["steps"] == s["batches"] * 2 * 4  # every step of 3 streams of 10
    assert s["bytes"] == sum(sh["bytes"] for sh in manifest["shards"])
    assert [f["name"] for f in s["fields"]] == ["frame", "homography"] and s["fields"][0]["shape"] == [3, 16, 16]
    assert s["source"]["plugin"] == "camera" and s["epochs"] == [0]


def test_replay_prints_a_summary_for_people(export: Path) -> None:
    result = runner.invoke(app, ["replay", str(export)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "ok:" in text and "streams 3 of 3 replayed; 30 of" in text
    assert "camera -s count=3 -s size=16x16" in text and "frame uint8[3, 16, 16]" in text


def test_replay_lists_the_problems_verify_finds_and_changes_nothing(export: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(export, bad)
    shard = bad / "shard-00001.npz"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    (bad / ".partial.json").write_text("{}")  # verify would tidy this away; replay must leave it
    before = {p.name: p.read_bytes() for p in bad.iterdir()}
    result = runner.invoke(app, ["replay", str(bad), "--json"])
    assert result.exit_code == 1, result.output
    s = json.loads(result.output[: result.output.rindex("}") + 1])
    assert s["ok"] is False and any("shard-00001.npz" in p for p in s["problems"])
    assert any(".partial.json" in p for p in s["problems"])
    assert {p.name: p.read_bytes() for p in bad.iterdir()} == before


def test_replay_of_a_folder_with_no_export_is_a_data_error_as_in_verify(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "holds no export (no index.json)" in result.output
