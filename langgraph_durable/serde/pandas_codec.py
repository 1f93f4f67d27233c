"""pandas DataFrame / Series <-> Parquet (pyarrow), exactly.

pyarrow's own pandas metadata already restores most dtypes (categoricals, tz-aware datetimes,
nullable and pyarrow-backed dtypes), the row index (named, MultiIndex, RangeIndex) and
``attrs``. This codec adds what Parquet alone loses, in its own schema metadata entry
``langgraph_durable``:

* column labels of any simple type (ints, bools, tuples, timestamps, duplicates, MultiIndex,
  RangeIndex): the labels are stored as tagged JSON and Parquet columns get positional names
  when the labels are not unique strings;
* row-index names that are not strings, and the ``freq`` of a Datetime/TimedeltaIndex;
* the time unit of ``datetime64[s]`` data (Parquet has no seconds unit);
* ``object`` columns: dtype and which missing marker each row had (``None``, ``NaN``, ...).

Before a frame is accepted its empty slice is round-tripped and compared with
``assert_frame_equal(check_exact=True)``; any difference raises :class:`UnsupportedValueError`
instead of silently storing an inexact copy. ``object`` columns must hold strings, bytes,
bools, decimals, dates or times; Python lists/dicts/mixed types are refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from typing import Any

from langgraph_durable.serde.extref_errors import UnsupportedValueError

__all__ = ["PandasCodec"]

_META_KEY = b"langgraph_durable"
_CASTABLE = ("datetime64", "timedelta64", "object")


def _tag(value: Any) -> Any:
    """A JSON-able, type-preserving form of one label."""
    import numpy as np
    import pandas as pd

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return {"f": repr(float(value))} if not math.isfinite(value) else float(value)
    if isinstance(value, tuple):
        return {"t": [_tag(v) for v in value]}
    if value is pd.NaT:
        return {"nat": True}
    if isinstance(value, pd.Timestamp):
        return {"ts": value.isoformat(), "tz": str(value.tz) if value.tz else None, "u": value.unit}
    if isinstance(value, pd.Timedelta):
        return {"td": int(value.value), "u": value.unit}
    raise UnsupportedValueError(
        f"cannot store the label {value!r} of type {type(value).__name__} exactly; "
        "labels must be str, int, float, bool, None, tuples, Timestamps or Timedeltas"
    )


def _untag(value: Any) -> Any:
    import pandas as pd

    if not isinstance(value, dict):
        return value
    if "f" in value:
        return float(value["f"])
    if "t" in value:
        return tuple(_untag(v) for v in value["t"])
    if "nat" in value:
        return pd.NaT
    if "ts" in value:
        stamp = pd.Timestamp(value["ts"])
        stamp = stamp.tz_convert(value["tz"]) if value["tz"] else stamp
        return stamp.as_unit(value["u"])
    return pd.Timedelta(value["td"], unit="ns").as_unit(value["u"])


def _encode_index(idx: Any) -> dict[str, Any]:
    import pandas as pd

    if type(idx) is pd.RangeIndex:
        return {
            "k": "range",
            "start": idx.start,
            "stop": idx.stop,
            "step": idx.step,
            "name": _tag(idx.name),
        }
    if isinstance(idx, pd.MultiIndex):
        levels = [_encode_index(idx.get_level_values(i)) for i in range(idx.nlevels)]
        return {"k": "multi", "levels": levels, "names": [_tag(n) for n in idx.names]}
    return {
        "k": "flat",
        "dtype": str(idx.dtype),
        "name": _tag(idx.name),
        "values": [_tag(v) for v in idx.tolist()],
        "freq": getattr(idx, "freqstr", None),
    }


def _decode_index(spec: dict[str, Any]) -> Any:
    import pandas as pd

    if spec["k"] == "range":
        return pd.RangeIndex(spec["start"], spec["stop"], spec["step"], name=_untag(spec["name"]))
    if spec["k"] == "multi":
        arrays = [_decode_index(level) for level in spec["levels"]]
        return pd.MultiIndex.from_arrays(arrays, names=[_untag(n) for n in spec["names"]])
    values = [_untag(v) for v in spec["values"]]
    idx = pd.Index(values, dtype=spec["dtype"], tupleize_cols=False)
    return _with_freq(idx, spec.get("freq")).rename(_untag(spec["name"]))


def _with_freq(idx: Any, freq: str | None) -> Any:
    import pandas as pd

    if freq and isinstance(idx, pd.DatetimeIndex):
        return pd.DatetimeIndex(idx, freq=freq)
    if freq and isinstance(idx, pd.TimedeltaIndex):
        return pd.TimedeltaIndex(idx, freq=freq)
    return idx


def _missing_kind(value: Any) -> str:
    import pandas as pd

    if value is None:
        return "none"
    if value is pd.NA:
        return "na"
    if value is pd.NaT:
        return "nat"
    if isinstance(value, float):
        return "nan"
    raise UnsupportedValueError(f"cannot store the missing-value marker {value!r} exactly")


def _missing_marker(kind: str) -> Any:
    import pandas as pd

    return {"none": None, "na": pd.NA, "nat": pd.NaT, "nan": float("nan")}[kind]


def _object_missing(values: Any) -> dict[str, Any] | None:
    """Which marker each missing row of an object column holds: a default plus exceptions."""
    import numpy as np
    import pandas as pd

    rows = np.flatnonzero(pd.isna(values))
    if rows.size == 0:
        return None
    kinds: dict[str, list[int]] = {}
    for row in rows.tolist():
        kinds.setdefault(_missing_kind(values[row]), []).append(row)
    default = max(kinds, key=lambda k: len(kinds[k]))
    return {"default": default, "rows": {k: v for k, v in kinds.items() if k != default}}


def _arrow_type_ok_for_object(arrow_type: Any) -> bool:
    import pyarrow as pa

    t = pa.types
    checks = (
        *(t.is_string, t.is_large_string, t.is_binary, t.is_large_binary, t.is_null),
        *(t.is_boolean, t.is_decimal, t.is_date, t.is_time),
    )
    return any(check(arrow_type) for check in checks)


class PandasCodec:
    """Exact Parquet codec for ``pandas.DataFrame`` (``series=False``) or ``pandas.Series``.

    Args:
        series: handle Series instead of DataFrames.
        compression: Parquet compression (``"zstd"``, ``"snappy"``, ``"none"``, ...).
        verify_schema: round-trip each frame's empty slice and refuse inexact ones.

    ``encode`` raises :class:`UnsupportedValueError` (a ``ValueError``) naming the column for
    data Parquet cannot hold exactly (complex numbers, sparse arrays, object columns of lists).
    """

    extension = ".parquet"

    def __init__(
        self, *, series: bool = False, compression: str = "zstd", verify_schema: bool = True
    ) -> None:
        self.series = series
        self.compression = compression
        self.verify_schema = verify_schema
        self.format = "pandas.Series/parquet" if series else "pandas.DataFrame/parquet"

    def matches(self, obj: Any) -> bool:
        """``True`` for exact ``DataFrame`` (or ``Series``) instances, not subclasses."""
        pd = sys.modules.get("pandas")
        return pd is not None and type(obj) is (pd.Series if self.series else pd.DataFrame)

    def encode(self, obj: Any) -> bytes:
        """Parquet bytes (raises :class:`UnsupportedValueError`, see the class docstring)."""
        extra: dict[str, Any] = {}
        if self.series:
            extra["name"] = _tag(obj.name)
            obj = obj.to_frame(name=obj.name if isinstance(obj.name, str) else "values")
        data = self._encode_frame(obj, extra)
        if self.verify_schema:  # one row keeps categoricals' dictionaries
            self._verify(obj.iloc[: min(len(obj), 1)], extra)
        return data

    def _encode_frame(self, frame: Any, extra: dict[str, Any]) -> bytes:
        import numpy as np
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = frame.columns
        meta: dict[str, Any] = {"v": 1, **extra, "columns": _encode_index(columns)}
        self._check_columns(columns, meta["columns"])
        meta["dtypes"] = [str(d) for d in frame.dtypes]
        idx = frame.index
        meta["index"] = {
            "names": [_tag(n) for n in idx.names],
            "freq": getattr(idx, "freqstr", None),
            "dtypes": [str(idx.get_level_values(i).dtype) for i in range(idx.nlevels)],
        }
        if isinstance(idx, pd.MultiIndex):
            meta["index"]["level_freqs"] = [getattr(lv, "freqstr", None) for lv in idx.levels]
        work = frame.copy(deep=False)
        simple = type(columns) is pd.Index and columns.is_unique
        if not (simple and all(isinstance(c, str) for c in columns)):
            work.columns = [f"__col{i}__" for i in range(len(columns))]
        names = [n for n in idx.names if n is not None]
        if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            work.index = idx.set_names([None] * idx.nlevels)
        objects: dict[str, Any] = {}
        for pos, dtype in enumerate(frame.dtypes):
            if dtype is np.dtype(object):
                objects[str(pos)] = _object_missing(frame.iloc[:, pos].to_numpy())
        meta["objects"] = objects
        if len(frame) == 0:  # Parquet writes no dictionary for zero rows
            meta["cats"] = _categories(frame)
        try:
            table = pa.Table.from_pandas(work, preserve_index=None)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise UnsupportedValueError(f"cannot store this DataFrame as Parquet: {exc}") from exc
        for pos in map(int, objects):
            arrow_type = table.schema.field(str(work.columns[pos])).type
            if not _arrow_type_ok_for_object(arrow_type):
                label = columns[pos]
                raise UnsupportedValueError(
                    f"column {label!r} has dtype object holding values Parquet turns into "
                    f"{arrow_type}, which would not read back as the same Python objects; "
                    "convert it to a typed dtype or to strings first",
                    dtype="object",
                    column=str(label),
                )
        metadata = dict(table.schema.metadata or {})
        metadata[_META_KEY] = json.dumps(meta).encode()
        buf = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(metadata), buf, compression=self.compression)
        return buf.getvalue()

    @staticmethod
    def _check_columns(columns: Any, spec: dict[str, Any]) -> None:
        import pandas as pd

        try:
            pd.testing.assert_index_equal(_decode_index(spec), columns, exact=True)
        except (AssertionError, TypeError, ValueError) as exc:
            raise UnsupportedValueError(
                f"cannot store the column labels {columns!r} exactly: {exc}"
            ) from exc

    def _verify(self, head: Any, extra: dict[str, Any]) -> None:
        import pandas as pd

        back = self._decode_frame(self._encode_frame(head, extra))[0]
        try:
            pd.testing.assert_frame_equal(back, head, check_exact=True, check_freq=False)
        except AssertionError as exc:
            raise UnsupportedValueError(
                f"this DataFrame would not read back from Parquet exactly: {exc}"
            ) from exc

    def decode(self, data: bytes) -> Any:
        """The DataFrame (or Series) encoded by :meth:`encode`."""
        frame, meta = self._decode_frame(data)
        if not self.series:
            return frame
        series = frame.iloc[:, 0]
        series.name = _untag(meta["name"])
        return series

    @staticmethod
    def _decode_frame(data: bytes) -> tuple[Any, dict[str, Any]]:
        import pandas as pd
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
        meta = json.loads((table.schema.metadata or {})[_META_KEY])
        out = table.to_pandas()
        for pos, want in enumerate(meta["dtypes"]):
            col = out.iloc[:, pos]
            if want == "object":
                values = col.to_numpy(dtype=object, copy=True)
                missing = meta["objects"].get(str(pos))
                if missing:
                    values[pd.isna(values)] = _missing_marker(missing["default"])
                    for kind, rows in missing["rows"].items():
                        for row in rows:
                            values[row] = _missing_marker(kind)
                out.isetitem(pos, pd.Series(values, index=out.index, dtype=object))
            elif str(col.dtype) != want and want.startswith(_CASTABLE):
                out.isetitem(pos, col.astype(want))
        cats = meta.get("cats", {})
        for pos in range(out.shape[1]):
            if f"c{pos}" in cats:
                out.isetitem(pos, out.iloc[:, pos].astype(_decode_categorical(cats[f"c{pos}"])))
        out.index = _restore_index(out.index, meta["index"], cats)
        out.columns = _decode_index(meta["columns"])
        return out, meta


def _categories(frame: Any) -> dict[str, Any]:
    """Categorical dtypes of the columns (``c<pos>``) and index levels (``i<level>``)."""
    import pandas as pd

    out: dict[str, Any] = {}
    named = [(f"c{pos}", dtype) for pos, dtype in enumerate(frame.dtypes)]
    idx = frame.index
    named += [(f"i{i}", idx.get_level_values(i).dtype) for i in range(idx.nlevels)]
    for name, dtype in named:
        if isinstance(dtype, pd.CategoricalDtype):
            out[name] = {"categories": _encode_index(dtype.categories), "ordered": dtype.ordered}
    return out


def _decode_categorical(spec: dict[str, Any]) -> Any:
    import pandas as pd

    return pd.CategoricalDtype(_decode_index(spec["categories"]), ordered=spec["ordered"])


def _restore_index(idx: Any, spec: dict[str, Any], cats: dict[str, Any]) -> Any:
    import pandas as pd

    wants: list[str] = spec["dtypes"]
    levels = [idx.get_level_values(i) for i in range(idx.nlevels)]
    changed = False
    for i, (level, want) in enumerate(zip(levels, wants, strict=True)):
        if f"i{i}" in cats:
            levels[i] = level.astype(_decode_categorical(cats[f"i{i}"]))
            changed = True
        elif str(level.dtype) != want and want.startswith(_CASTABLE):
            levels[i] = level.astype(want)
            changed = True
    if changed:
        idx = pd.MultiIndex.from_arrays(levels) if idx.nlevels > 1 else levels[0]
    idx = idx.set_names([_untag(n) for n in spec["names"]])
    freqs = spec.get("level_freqs") or []
    if any(freqs):
        with contextlib.suppress(ValueError):  # levels that no longer conform keep no freq
            idx = idx.set_levels(
                [_with_freq(lv, f) for lv, f in zip(idx.levels, freqs, strict=True)]
            )
    return _with_freq(idx, spec.get("freq"))
