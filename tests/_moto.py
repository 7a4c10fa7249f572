"""A real S3 protocol server for the object-storage tests: moto's ``ThreadedMotoServer`` on loopback.

One server per test session, on a free port, with fake credentials and ``AWS_ENDPOINT_URL`` in the
environment, so s3fs here and in every subprocess (an ``streamcli export`` we kill, spawn workers) talk to it.
``stop()`` and ``start()`` take it down and up on the same port; moto keeps the buckets in this process, so
nothing stored is lost in between. Tests are skipped where moto or s3fs is not installed.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": "2",  # botocore's own retries: few, so streamcli's retries are what a test sees
    "STREAMCLI_STORAGE_RETRIES": "8",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MotoS3:
    port: int
    server: Any = None
    buckets: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def bucket(self) -> str:
        """A new empty bucket's URL (``s3://t-1a2b3c4d``)."""
        import fsspec

        name = f"t-{uuid.uuid4().hex[:8]}"
        fs = fsspec.filesystem("s3")
        fs.mkdir(name)
        self.buckets.append(name)
        return f"s3://{name}"


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
    saved = {k: os.environ.get(k) for k in [*ENV, "AWS_ENDPOINT_URL"]}
    server = MotoS3(free_port())
    server.start()
    os.environ.update(ENV, AWS_ENDPOINT_URL=server.endpoint)
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(moto_s3: MotoS3) -> str:
    """An empty bucket on the session's moto server, as ``s3://name``."""
    return moto_s3.bucket()
