"""The closing lines of preview and export state rates that follow from their own counts and times."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.shards.writer import ShardWriter

runner = CliRunner()
TEXT = Path(__file__).resolve().parent / "data" / "text"


def _within(rate: float, count: float, secs: str, digits: int = 1) -> bool:
    """``rate``, printed with ``digits`` decimals, is ``count`` over ``secs`` as printed, given both roundings."""
    s = float(secs)
    half = s * 5e-3 if "e" in secs else 0.5 * 10 ** -len(secs.partition(".")[2])
    lo = count / (s + half) - 0.5 * 10**-digits
    hi = (count / (s - half) if s > half else float("inf")) + 0.5 * 10**-digits
    return lo <= rate <= hi


def test_preview_summary_rates_match_its_own_counts() -> None:
    result = runner.invoke(app, ["preview", "text", str(TEXT), "-b", "2", "-t", "4", "-w", "0", "--batches", "6"])
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("preview:"))
    whole = re.search(r"preview: (\d+) batches.*? in ([\d.]+) s[,:] ([\d.]+) batches/s", line)
    assert whole is not None, line
    n, secs, rate = int(whole.group(1)), whole.group(2), float(whole.group(3))
    assert n == 6
    assert _within(rate, n, secs), line
    steady = re.search(r"then (\d+) more in ([\d.e-]+) s, ([\d.]+) batches/s", line)
    assert steady is not None, line
    assert int(steady.group(1)) == n - 1 and _within(float(steady.group(3)), n - 1, steady.group(2)), line


@pytest.fixture
def interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """An export stopped by Ctrl-C after its fourth batch, with one batch per shard."""
    out = tmp_path / "out"
    args = ["export", "camera", "-s", "size=96x128", "-s", "count=4", "-s", "steps=32", str(out)]
    args += ["-b", "2", "-t", "4", "-w", "0", "--batches", "8", "--shard-size", "1"]  # one batch (295 kB) per shard
    real_write = ShardWriter.write
    calls = {"n": 0}

    def write(self: ShardWriter, *a: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real_write(self, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(ShardWriter, "write", write)
        result = runner.invoke(app, args)
    assert result.exit_code == 130, result.output
    assert not (out / "index.json").exists() and len(list(out.glob("shard-*.npz"))) >= 1
    return out, args


def test_a_resumed_export_says_what_it_kept_and_times_only_what_it_wrote(
    interrupted: tuple[Path, list[str]],
) -> None:
    out, args = interrupted
    kept = sorted(p.name for p in out.glob("shard-*.npz"))
    result = runner.invoke(app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    shards = json.loads((out / "index.json").read_text())["shards"]
    kept_bytes = sum(s["bytes"] for s in shards if s["name"] in kept)
    new_bytes = sum(s["bytes"] for s in shards) - kept_bytes
    assert f"resumed: kept {len(kept)} shards ({len(kept)} batches" in text, text
    m = re.search(r"wrote (\d+) batches in (\d+) shards? to .*?: ([\d.]+) MB in ([\d.]+) s \(([\d.]+) MB/s", text)
    assert m is not None, text
    assert int(m.group(1)) == 8 - len(kept) and int(m.group(2)) == len(shards) - len(kept)
    assert m.group(3) == f"{new_bytes / 1e6:.1f}" and new_bytes > 10**6
    assert _within(float(m.group(5)), new_bytes / 1e6, m.group(4)), text
    assert f"the export now holds 8 batches in {len(shards)} shards" in text
