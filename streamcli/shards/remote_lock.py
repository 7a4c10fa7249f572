"""``RemoteLock``: one export at a time per URL, with a lock object that its holder keeps fresh.

Object storage has no OS lock that dies with its process, so the lock is an object, ``.streamcli.lock``, created
with a conditional put (``If-None-Match: *``: S3, and moto, refuse to create it when it exists, so of two
exports starting together exactly one wins). It holds the holder's pid, host, a random token and a heartbeat
time, which a background thread refreshes every ``STALE_S / 4`` seconds. Before each shard and the manifest the
writer checks that the object still holds its token (``check``), so an export whose lock was taken over stops
within one shard instead of interleaving.

A lock is stale, and taken over, when its holder is a dead process on this host, or its heartbeat is older than
``STALE_S`` (``$STREAMCLI_LOCK_STALE_S``, default 120 s; a killed export on another machine blocks the URL that
long). Limits: taking over a stale lock deletes it and creates a new one, and two exports that find the same
stale lock at the same moment could both delete and one of them recreate it; the token check before every write
stops the loser at its next shard. Storage without conditional puts gets a write, then a re-read of the token.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
import weakref
from typing import Any

from streamcli.errors import ExportBusyError
from streamcli.shards.format import LOCK
from streamcli.storage.remote import NoConditionalPut, Remote


def stale_after() -> float:
    try:
        return max(1.0, float(os.environ.get("STREAMCLI_LOCK_STALE_S", "120")))
    except ValueError:
        return 120.0


def read_holder(remote: Remote) -> dict[str, Any] | None:
    """The lock object's content, or None if there is none (or it is unreadable: then it is stale)."""
    try:
        info = json.loads(remote.read(LOCK))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def describe(info: dict[str, Any]) -> str:
    try:
        age = time.time() - float(info["beat"])
        return f"pid {info['pid']} on {info['host']}, since {info['started']}, last seen {age:.0f} s ago"
    except (KeyError, TypeError, ValueError):
        return "holder unknown"


def is_stale(info: dict[str, Any]) -> bool:
    """Whether the holder described by ``info`` is gone: a dead process on this host, or a heartbeat too old."""
    try:
        if info.get("host") == socket.gethostname():
            try:
                os.kill(int(info["pid"]), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass  # alive, another user's
        return bool(time.time() - float(info["beat"]) > stale_after())
    except (KeyError, TypeError, ValueError):
        return True


def busy(remote: Remote) -> str | None:
    """Who is exporting to the URL right now, or None; changes nothing (``verify`` asks this)."""
    info = read_holder(remote)
    return None if info is None or is_stale(info) else describe(info)


class RemoteLock:
    """Hold the export lock of the URL ``remote`` names; raise ``ExportBusyError`` naming a live holder."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.token = uuid.uuid4().hex
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = ""
        for _ in range(3):
            if self._create():
                break
            info = read_holder(remote)
            if info is not None and not is_stale(info):
                raise ExportBusyError(
                    f"{remote.url!r} is being written by another export ({describe(info)}); wait for it to finish or "
                    f"stop it, then rerun (a killed export elsewhere frees it after {stale_after():.0f} s)"
                )
            remote.remove(LOCK)  # stale: take it over
        else:
            raise ExportBusyError(f"{remote.url!r}: cannot take the export lock; another export keeps taking it")
        self._held = True
        # The thread holds the lock weakly, so a writer dropped without close() frees the URL, as a local one does.
        self._thread = threading.Thread(
            target=_beat, args=(weakref.ref(self), self._stop), name="streamcli-lock", daemon=True
        )
        self._thread.start()

    def _payload(self) -> bytes:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": self.started, "token": self.token}
        return (json.dumps({**info, "beat": time.time()}) + "\n").encode()

    def _create(self) -> bool:
        try:
            self.remote.write(LOCK, self._payload(), exclusive=True)
        except FileExistsError:
            return False
        except NoConditionalPut:  # a backend without conditional puts: write, then see whose token stayed
            if read_holder(self.remote) is not None:
                return False
            self.remote.write(LOCK, self._payload())
        return self._ours()

    def _ours(self) -> bool:
        info = read_holder(self.remote)
        return info is not None and info.get("token") == self.token

    def refresh(self) -> bool:
        """Renew the heartbeat; False if the lock is no longer ours (``lost`` set) or the storage did not answer.

        A storage that does not answer is no verdict on the lock: the heartbeat tries again, and the writer's next
        ``check`` reads the lock itself, so an outage fails the upload that meets it, naming that upload."""
        try:
            if not self._ours():
                self.lost = "another export took the lock over"
                return False
            self.remote.write(LOCK, self._payload())
            return True
        except Exception:
            return False

    def check(self) -> None:
        """Raise ``ExportBusyError`` unless this export still holds the lock (called before each write)."""
        if self.lost or not self._ours():
            why = self.lost or "another export took the lock over"
            raise ExportBusyError(f"{self.remote.url!r}: {why}; stopped writing (rerun with --resume)")

    def release(self, *, quick: bool = False) -> None:
        """Remove the lock object if it is still ours. ``quick`` (the storage just failed): one try, no retries, so an
        outage fails the export in its deadline, not twice that; a lock left behind expires (at once for a dead
        process on this host)."""
        if not self._held:
            return
        self._held = False
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1 if quick else 10)
        try:
            if not quick:
                if self._ours():
                    self.remote.remove(LOCK)
                return
            fs, path = self.remote.fs, self.remote.path(LOCK)
            if json.loads(fs.cat_file(path)).get("token") == self.token:
                fs.rm_file(path)
        except Exception:
            pass  # a lock left behind expires; releasing must not hide the error that ended the export

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __enter__(self) -> RemoteLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _beat(ref: weakref.ref[RemoteLock], stop: threading.Event) -> None:
    """Refresh the lock every ``stale_after() / 4`` seconds until it is released, lost or dropped."""
    while not stop.wait(stale_after() / 4):
        lock = ref()
        if lock is None or (not lock.refresh() and lock.lost):
            return
        del lock
