"""Content-addressed blob stores: the protocol, its base class and a local folder (any
S3-compatible bucket: ``serde/s3_store.py``).

Every store implements :class:`BlobStore`. The synchronous methods do blocking I/O; the ``a``
variants run them in a worker thread with :func:`asyncio.to_thread`, so an event loop never
blocks on disk or network.

Keys are written once and never change (the key is a hash of the content), so a put of an
existing key is skipped. Skipping it *refreshes the blob's last-modified time* (at most once per
``touch_after_s`` seconds): garbage collection keeps blobs younger than its grace period, so a
blob that a new checkpoint starts to reference again is not deleted while that checkpoint is
being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from langgraph_durable.serde.deadline import DeadlinePassed
from langgraph_durable.serde.extref_errors import (
    BlobNotFoundError,
    BlobStoreError,
    ExternalRefError,
)

__all__ = ["BaseBlobStore", "BlobInfo", "BlobStore", "LocalBlobStore"]

_LOCAL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")


class BlobInfo(NamedTuple):
    """One stored blob: ``(key, last_modified_utc, size)``; ``size`` is in bytes and
    ``last_modified`` is a timezone-aware UTC datetime."""

    key: str
    last_modified: datetime
    size: int


@runtime_checkable
class BlobStore(Protocol):
    """What :class:`~langgraph_durable.serde.ExternalRefSerializer` needs from a blob store."""

    name: str
    """Where the blobs live, e.g. ``"s3://bucket/prefix/"``; recorded in every reference."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless the key exists; ``True`` if this call wrote it."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under ``key``; raises :class:`BlobNotFoundError` if there are none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...

    def list_keys(self) -> Iterator[BlobInfo]:
        """Every stored blob, in no particular order."""
        ...

    async def aput_if_absent(self, key: str, data: bytes) -> bool:
        """Async :meth:`put_if_absent`."""
        ...

    async def aget(self, key: str) -> bytes:
        """Async :meth:`get`."""
        ...

    async def aexists(self, key: str) -> bool:
        """Async :meth:`exists`."""
        ...

    async def adelete(self, key: str) -> None:
        """Async :meth:`delete`."""
        ...

    def alist_keys(self) -> AsyncIterator[BlobInfo]:
        """Async :meth:`list_keys`."""
        ...


class BaseBlobStore(ABC):
    """Base class providing the async methods on top of the sync ones (worker threads)."""

    name: str = ""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless the key exists; ``True`` if this call wrote it."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The bytes under ``key``; raises :class:`BlobNotFoundError` if there are none."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; removing a missing key is not an error."""

    @abstractmethod
    def list_keys(self) -> Iterator[BlobInfo]:
        """Every stored blob, in no particular order."""

    async def aput_if_absent(self, key: str, data: bytes) -> bool:
        """:meth:`put_if_absent` in a worker thread."""
        return await asyncio.to_thread(self.put_if_absent, key, data)

    async def aget(self, key: str) -> bytes:
        """:meth:`get` in a worker thread."""
        return await asyncio.to_thread(self.get, key)

    async def aexists(self, key: str) -> bool:
        """:meth:`exists` in a worker thread."""
        return await asyncio.to_thread(self.exists, key)

    async def adelete(self, key: str) -> None:
        """:meth:`delete` in a worker thread."""
        await asyncio.to_thread(self.delete, key)

    async def alist_keys(self) -> AsyncIterator[BlobInfo]:
        """:meth:`list_keys`, listed in a worker thread, then yielded."""
        for info in await asyncio.to_thread(lambda: list(self.list_keys())):
            yield info

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def error_code(exc: Exception) -> tuple[str, int]:
    """``(code, HTTP status)`` of a botocore ``ClientError`` (``("", 0)`` for any other
    exception), e.g. ``("NoSuchKey", 404)``."""
    response: dict[str, Any] = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


@contextlib.contextmanager
def io_errors(store: BaseBlobStore, action: str, key: str | None) -> Iterator[None]:
    """Turn the I/O failures of a store's client (botocore errors, ``OSError``) into
    :class:`BlobStoreError` naming the store and the key; "not found" answers and the
    package's own errors pass unchanged."""
    try:
        yield
    except (ExternalRefError, ValueError):
        raise
    except DeadlinePassed as exc:
        what = f"blob {key!r}" if key is not None else "its blobs"
        endpoint = getattr(store, "endpoint", None)
        raise BlobStoreError(
            f"blob store {store.name} failed to {action} {what} (endpoint {endpoint}): "
            f"{exc} (deadline {round(exc.deadline_s, 2):g} s)",
            key=key, store=store.name) from exc
    except Exception as exc:
        what = f"blob {key!r}" if key is not None else "its blobs"
        code, status = error_code(exc)
        detail = f" ({code}, HTTP {status})" if code or status else ""
        raise BlobStoreError(
            f"blob store {store.name} failed to {action} {what}{detail}: "
            f"{type(exc).__name__}: {exc}", key=key, store=store.name) from exc


class LocalBlobStore(BaseBlobStore):
    """Blobs as files below ``path`` (``path/<first 2 chars of key>/<key>``).

    Writes are atomic: a temporary file in the target folder is written, fsynced and renamed
    with :func:`os.replace`, so readers never see a partial blob. The folder is created on the
    first write. Keys must match ``[A-Za-z0-9][A-Za-z0-9._-]{1,254}`` (else ``ValueError``).

    Args:
        path: the root folder; relative paths are resolved against the current directory now.
        fsync: fsync each new file and its folder (durable across power loss; slower).
        touch_after_s: a skipped put refreshes the file's mtime if it is older than this many
            seconds (see the module docstring).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = True, touch_after_s: float = 60.0
    ) -> None:
        self.root = Path(path).expanduser().resolve()
        self.fsync = fsync
        self.touch_after_s = touch_after_s
        self.name = self.root.as_uri()

    def _path(self, key: str) -> Path:
        if not _LOCAL_KEY.fullmatch(key):
            raise ValueError(f"invalid blob key {key!r} for {self.name}")
        return self.root / key[:2] / key

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` atomically unless ``key`` exists (then refresh its mtime if old).
        The new file's mode follows the process umask. Raises :class:`BlobStoreError` when
        the folder cannot be written (permissions, disk full)."""
        target = self._path(key)
        with io_errors(self, "write", key):
            return self._put(target, data)

    def _put(self, target: Path, data: bytes) -> bool:
        try:
            mtime = target.stat().st_mtime
        except FileNotFoundError:
            pass
        else:
            if datetime.now(timezone.utc).timestamp() - mtime <= self.touch_after_s:
                return False
            try:
                os.utime(target)
                return False
            except FileNotFoundError:  # garbage-collected meanwhile: write it again
                pass
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_CREAT with 0o666: the process umask decides the mode, as for any new file
        # (tempfile.mkstemp would make it 0600)
        tmp = str(target.parent / f".tmp-{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if self.fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if self.fsync:
            self._fsync_dir(target.parent)
        return True

    @staticmethod
    def _fsync_dir(folder: Path) -> None:
        with contextlib.suppress(OSError):  # not possible on every platform
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def get(self, key: str) -> bytes:
        """The file's bytes; raises :class:`BlobNotFoundError` if it does not exist."""
        path = self._path(key)
        with io_errors(self, "read", key):
            try:
                return path.read_bytes()
            except FileNotFoundError:
                raise BlobNotFoundError(
                    f"blob {key!r} not found in {self.name}", key=key, store=self.name
                ) from None

    def exists(self, key: str) -> bool:
        """Whether the file exists."""
        return self._path(key).is_file()

    def stat(self, key: str) -> BlobInfo | None:
        """The blob's current :class:`BlobInfo`, or ``None`` if it does not exist."""
        try:
            st = self._path(key).stat()
        except FileNotFoundError:
            return None
        return BlobInfo(key, datetime.fromtimestamp(st.st_mtime, timezone.utc), st.st_size)

    def delete(self, key: str) -> None:
        """Remove the file if it exists."""
        self._path(key).unlink(missing_ok=True)

    def list_keys(self) -> Iterator[BlobInfo]:
        """Every blob file (temporary files of unfinished writes are skipped)."""
        if not self.root.is_dir():
            return
        for shard in sorted(self.root.iterdir()):
            if not shard.is_dir() or shard.name.startswith("."):
                continue
            for entry in os.scandir(shard):
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:  # deleted meanwhile
                    continue
                modified = datetime.fromtimestamp(st.st_mtime, timezone.utc)
                yield BlobInfo(entry.name, modified, st.st_size)


def default_local_store() -> LocalBlobStore:
    """The store used when none is given: ``$LANGGRAPH_BLOB_DIR`` or ``./.langgraph_blobs``."""
    return LocalBlobStore(os.environ.get("LANGGRAPH_BLOB_DIR") or ".langgraph_blobs")


def _ensure_store(store: object) -> BlobStore:
    if not isinstance(store, BlobStore):
        raise ExternalRefError(f"{store!r} does not implement the BlobStore protocol")
    return store
