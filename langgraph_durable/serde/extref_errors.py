"""Exceptions raised by the external-reference serializer, its codecs and its blob stores."""

from __future__ import annotations

from typing import Any

from langgraph_durable.errors import DurableSaverError

__all__ = [
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BlobStoreError",
    "ExternalRefError",
    "UnsupportedValueError",
]


class ExternalRefError(Exception):
    """Base class of every error of :mod:`langgraph_durable.serde`.

    Attributes:
        key: the blob key concerned, or ``None``.
        store: the name of the blob store concerned (e.g. ``"s3://bucket/prefix/"``), or ``None``.
        context: extra facts added by callers that know more than the serializer (a saver adds
            ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``, ``channel``); they are
            appended to ``str(error)``.
    """

    def __init__(self, message: str, *, key: str | None = None, store: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.store = store
        self.context: dict[str, Any] = {}

    def add_context(self, **context: Any) -> ExternalRefError:
        """Record extra facts (``None`` values are ignored) and return ``self``.

        Lets a saver write ``raise err.add_context(thread_id=..., channel=...)``.
        """
        self.context.update({k: v for k, v in context.items() if v is not None})
        return self

    def __str__(self) -> str:
        if not self.context:
            return self.message
        extra = ", ".join(f"{k}={v!r}" for k, v in self.context.items())
        return f"{self.message} [{extra}]"


class BlobNotFoundError(ExternalRefError, LookupError):
    """A checkpoint references a blob that its store does not hold (``key`` names it)."""


class BlobStoreError(ExternalRefError, DurableSaverError, ConnectionError):
    """A blob store could not be reached or refused the request (no credentials, endpoint
    unreachable, no such bucket, access denied, disk full, permissions): an I/O failure, not a
    bad value, so the same call may succeed later (retryable). ``store`` and ``key`` name the
    store and the blob (``key`` is None for a listing); the cause is chained
    (``__cause__``). Nothing was written to the saver's tiers when a ``put`` raises it."""


class BlobIntegrityError(ExternalRefError):
    """A blob's content does not match the SHA-256 recorded in its reference, or it could not
    be decrypted.

    Attributes:
        expected: the hex SHA-256 recorded in the checkpoint.
        actual: the hex SHA-256 of the bytes read, or ``None`` when decryption failed first.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        store: str | None = None,
        expected: str | None = None,
        actual: str | None = None,
    ) -> None:
        super().__init__(message, key=key, store=store)
        self.expected = expected
        self.actual = actual


class UnsupportedValueError(ExternalRefError, ValueError):
    """A value cannot be stored exactly by its codec (e.g. a NumPy ``object`` array, which would
    need pickle, or a DataFrame column of Python lists).

    Attributes:
        dtype: the offending dtype as text, when one is known.
        column: the offending column label as text, when one is known.
    """

    def __init__(
        self, message: str, *, dtype: str | None = None, column: str | None = None
    ) -> None:
        super().__init__(message)
        self.dtype = dtype
        self.column = column
