"""A Ray export to an ``s3://`` URL (moto's S3 server): the tasks upload their shards; the result is the local
export's bytes, and a resume keeps what is there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_ray_export import files, job, local

from streamcli.shards.on_ray import export_on_ray
from streamcli.storage.remote import Remote

pytestmark = pytest.mark.xdist_group("ray")  # see test_ray_export.py


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_ray_export_to_s3_is_the_local_export_and_resumes(tmp_path: Path, bucket: str, ray_session: str) -> None:
    url = f"{bucket}/ray"
    j = job(url)  # type: ignore[arg-type]
    local(tmp_path / "local", j)
    m = export_on_ray(j, mode="new", partitions=2)
    r = Remote(url)
    assert {n: r.read(n) for n in sorted(r.listing())} == files(tmp_path / "local")
    assert m["batches"] == j.total
    manifest = json.loads(r.read("index.json"))
    r.remove("index.json")  # the driver died before the commit, and one task's shard is gone
    r.remove(manifest["shards"][1]["name"])
    r.write(".partial.json", json.dumps({"header": j.header, "shards": []}).encode())
    export_on_ray(j, mode="resume", partitions=2)
    assert {n: r.read(n) for n in sorted(r.listing())} == files(tmp_path / "local")
