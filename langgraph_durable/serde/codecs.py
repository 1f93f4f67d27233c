"""Codecs turning large values into portable bytes (Parquet, ``.npy``) without pickle.

A codec claims values by *exact* type (subclasses such as a GeoDataFrame are left to the inner
serializer, which knows nothing of them, rather than silently losing their subclass) and only
when the defining library is already imported, so checking a value never imports pandas.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langgraph_durable.serde.extref_errors import UnsupportedValueError

__all__ = ["Codec", "NumpyCodec", "PolarsCodec", "default_codecs"]


@runtime_checkable
class Codec(Protocol):
    """Encodes one family of values to bytes and back, exactly."""

    format: str
    """Stable name recorded in each reference, e.g. ``"pandas.DataFrame/parquet"``."""
    extension: str
    """File extension for the blob key, e.g. ``".parquet"``."""

    def matches(self, obj: Any) -> bool:
        """Whether this codec handles ``obj`` (must be cheap: it runs on every value)."""
        ...

    def encode(self, obj: Any) -> bytes:
        """The bytes of ``obj``; raises :class:`UnsupportedValueError` if not exact."""
        ...

    def decode(self, data: bytes) -> Any:
        """The value encoded in ``data``."""
        ...


class NumpyCodec:
    """``numpy.ndarray`` as a ``.npy`` file (``numpy.save(allow_pickle=False)``).

    Keeps dtype (incl. byte order, structured, datetime64, unicode), shape and memory order.
    Arrays whose dtype holds Python objects raise :class:`UnsupportedValueError` naming it:
    they could only be stored with pickle.
    """

    format = "numpy.ndarray/npy"
    extension = ".npy"

    def matches(self, obj: Any) -> bool:
        """``True`` for exact ``numpy.ndarray`` instances (not subclasses, not scalars)."""
        np = sys.modules.get("numpy")
        return np is not None and type(obj) is np.ndarray

    def encode(self, obj: Any) -> bytes:
        """``.npy`` bytes; raises :class:`UnsupportedValueError` for object dtypes."""
        import numpy as np

        if obj.dtype.hasobject:
            raise UnsupportedValueError(
                f"cannot store a NumPy array of dtype {obj.dtype!s}: it holds Python objects, "
                "which .npy only supports through pickle; convert it to a typed dtype "
                "(e.g. arr.astype(str) or a pandas DataFrame) first",
                dtype=str(obj.dtype),
            )
        buf = io.BytesIO()
        np.save(buf, obj, allow_pickle=False)
        return buf.getvalue()

    def decode(self, data: bytes) -> Any:
        """The array (writable, owns its memory)."""
        import numpy as np

        return np.load(io.BytesIO(data), allow_pickle=False)


class PolarsCodec:
    """``polars.DataFrame`` as Parquet via polars itself (active only when polars is imported)."""

    format = "polars.DataFrame/parquet"
    extension = ".parquet"

    def __init__(self, compression: str = "zstd") -> None:
        self.compression = compression

    def matches(self, obj: Any) -> bool:
        """``True`` for exact ``polars.DataFrame`` instances."""
        pl = sys.modules.get("polars")
        return pl is not None and type(obj) is pl.DataFrame

    def encode(self, obj: Any) -> bytes:  # pragma: no cover - polars is not installed in CI
        """Parquet bytes written by ``DataFrame.write_parquet``."""
        buf = io.BytesIO()
        obj.write_parquet(buf, compression=self.compression)
        return buf.getvalue()

    def decode(self, data: bytes) -> Any:  # pragma: no cover - polars is not installed in CI
        """The frame; raises ``ImportError`` if polars is not installed."""
        import polars as pl

        return pl.read_parquet(io.BytesIO(data))


def default_codecs() -> list[Codec]:
    """pandas DataFrame and Series (Parquet), NumPy arrays (.npy) and polars DataFrames."""
    from langgraph_durable.serde.pandas_codec import PandasCodec

    return [PandasCodec(series=False), PandasCodec(series=True), NumpyCodec(), PolarsCodec()]


def codecs_by_format(codecs: Sequence[Codec]) -> dict[str, Codec]:
    """Index codecs by :attr:`Codec.format`; raises ``ValueError`` on duplicates."""
    out: dict[str, Codec] = {}
    for codec in codecs:
        if codec.format in out:
            raise ValueError(f"two codecs claim the format {codec.format!r}")
        out[codec.format] = codec
    return out
