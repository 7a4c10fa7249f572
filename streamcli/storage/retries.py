"""The retry policy of every storage request: which errors are transient, how long and how often to retry.

A transient error (connection refused or reset, a timeout, a 5xx answer, throttling) is retried with
exponential backoff, ``STREAMCLI_STORAGE_RETRIES`` tries in all (default 6) within ``STREAMCLI_STORAGE_DEADLINE_S``
seconds of the first (default 20: an outage fails in about that long, not minutes), each retry logged on the
``streamcli`` logger. A permanent error, or one that outlasts the retries, raises ``StorageError`` naming the URL.
Separate from ``remote`` because it knows nothing of fsspec or URLs: it judges exceptions and waits.
``NoConditionalPut`` is here because ``retry`` passes it through untried, like a missing object.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

from streamcli.errors import StorageError

T = TypeVar("T")
_log = logging.getLogger("streamcli")

BACKOFF_S = 0.25
"""The first retry waits this long; each next one twice as long, up to ``BACKOFF_MAX_S``."""
BACKOFF_MAX_S = 8.0
_PERMANENT = (FileNotFoundError, PermissionError, FileExistsError, IsADirectoryError, NotADirectoryError)
_TRANSIENT_TYPES = {
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ServerDisconnectedError",
    "ClientConnectorError",
    "ClientConnectionError",
    "ClientPayloadError",
    "ClientOSError",
    "IncompleteRead",
    "FSTimeoutError",
    "ResponseStreamingError",
    "ProtocolError",
}
_TRANSIENT_WORDS = (
    "SlowDown",
    "Throttl",
    "TooManyRequests",
    "RequestLimitExceeded",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "Bad Gateway",
    "Gateway Timeout",
    "Connection reset",
)


class NoConditionalPut(Exception):
    """The storage cannot create an object only if it is absent (``RemoteLock`` then writes and re-reads)."""


def attempts() -> int:
    """How many times a request is tried: ``STREAMCLI_STORAGE_RETRIES`` (at least 1), default 6."""
    try:
        return max(1, int(os.environ.get("STREAMCLI_STORAGE_RETRIES", "6")))
    except ValueError:
        return 6


def deadline_s() -> float:
    """How long a request is retried, from its first try: ``STREAMCLI_STORAGE_DEADLINE_S`` (default 20)."""
    try:
        value = float(os.environ.get("STREAMCLI_STORAGE_DEADLINE_S", "20"))
    except ValueError:
        return 20.0
    return value if value >= 0 else 20.0


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error behind it) is worth retrying: the network or the service, not the request."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, _PERMANENT):
            return False
        if isinstance(cur, (ConnectionError, TimeoutError)):
            return True
        if any(t.__name__ in _TRANSIENT_TYPES for t in type(cur).__mro__):
            return True
        status = getattr(cur, "response", None)
        if isinstance(status, dict):
            code = status.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code >= 500 or code == 429:
                return True
        if any(w in str(cur) for w in _TRANSIENT_WORDS):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def retry(fn: Callable[[], T], what: str, url: str) -> T:
    """``fn()``, retried with backoff on transient errors; ``what`` and ``url`` name it in logs and errors."""
    n, limit = attempts(), deadline_s()
    start = time.monotonic()
    for i in range(n):
        try:
            return fn()
        except (FileNotFoundError, FileExistsError, NoConditionalPut, StorageError):
            raise  # the caller's to name or handle
        except Exception as exc:
            if not transient(exc):
                hint = _HINTS.get(type(exc), "")
                raise StorageError(f"{what} {url!r} failed: {describe(exc)}{hint}") from None
            wait = min(BACKOFF_MAX_S, BACKOFF_S * 2**i)
            spent = time.monotonic() - start
            if i == n - 1 or spent + wait > limit:
                raise StorageError(
                    f"{what} {url!r} still failed after {i + 1} tries: {describe(exc)}; tried for {spent:.0f} s; "
                    "check the connection and the service, then rerun (STREAMCLI_STORAGE_RETRIES and "
                    "STREAMCLI_STORAGE_DEADLINE_S set how long it tries)"
                ) from exc
            _log.warning(
                "streamcli: %s %s failed (%s); retry %d of %d in %.2g s", what, url, describe(exc), i + 1, n - 1, wait
            )
            time.sleep(wait)
    raise AssertionError("unreachable")


_HINTS: dict[type[BaseException], str] = {
    PermissionError: "; check the credentials (AWS_* variables, ~/.aws, fsspec's config) and the permissions",
}


def describe(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
