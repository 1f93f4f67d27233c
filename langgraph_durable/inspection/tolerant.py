"""Reading without failing: a serializer wrapper for read-only tools (the CLI's read
commands, the dashboard) that shows a value it cannot decode instead of raising."""

from __future__ import annotations

from typing import Any

__all__ = ["TolerantSerde", "Undecodable"]


class Undecodable:
    """Stands for a stored value the CLI's serializer could not decode (shown, never
    written back): its serializer type, size in bytes and the error's type."""

    __slots__ = ("type", "size", "error")

    def __init__(self, type_: str, size: int, error: str) -> None:
        self.type, self.size, self.error = type_, size, error

    def __repr__(self) -> str:
        return f"<undecodable {self.type} value, {self.size} bytes: {self.error}>"


class TolerantSerde:
    """Wraps a serializer for read-only commands: a value that does not decode (a blob
    store or key not given, a type not allowed) becomes an ``Undecodable``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def encrypted(self) -> bool:
        """Whether the inner serializer encrypts (an ``EncryptedSerializer``, or one that
        says ``encrypted``): the saver then treats this one alike (keyed item digests)."""
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        return isinstance(self.inner, EncryptedSerializer) or bool(
            getattr(self.inner, "encrypted", False))

    @property
    def _cipher(self) -> Any:
        """The inner serializer's cipher (None for a plain one)."""
        return getattr(self.inner, "cipher", None) or getattr(self.inner, "_cipher", None)

    @property
    def store(self) -> Any:
        """The inner serializer's blob store (``ExternalRefSerializer``), else None."""
        return getattr(self.inner, "store", None)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The inner serializer's ``dumps_typed``."""
        return self.inner.dumps_typed(obj)  # type: ignore[no-any-return]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The inner serializer's ``loads_typed``, or an ``Undecodable``."""
        try:
            return self.inner.loads_typed(data)
        except Exception as exc:
            from ..serde.external import EXTREF_TYPE, ExternalRefSerializer

            error = type(exc).__name__
            if data[0] == EXTREF_TYPE and not isinstance(self.inner, ExternalRefSerializer):
                error = "external reference: pass --blob-store to decode"
            return Undecodable(data[0], len(data[1]), error)
